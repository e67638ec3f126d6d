#include "core/runtime/gpt_oss_layer.h"

#include "core/base/strings.h"
#include "core/checkpoint/gpt_oss_layout.h"
#include "core/runtime/expert_streaming.h"
#include "core/runtime/llama_layer.h"
#include "core/runtime/module_loader.h"

namespace quark::runtime {
namespace {

// A plain holder for the experts, so that their children read "experts.3.gate_up_proj".
class ExpertList : public torch::nn::Module {};

}  // namespace

MoeBlock::RoutingFunction GptOssRouting(int64_t top_k, at::Tensor router_bias) {
  return [top_k, router_bias](const at::Tensor& flat, const at::Tensor& router) {
    const at::Tensor logits = at::linear(flat, router, router_bias.to(flat.scalar_type()));  // [N, E]
    auto [values, selected] = logits.topk(top_k, -1);                                       // [N, k]
    return MoeBlock::Routing{logits.to(at::kFloat), at::softmax(values, -1), selected};
  };
}

at::Tensor GptOssExpert::forward(const at::Tensor& x) {
  const at::Tensor gate_up = gate_up_proj->forward(x);  // [N, 2 I], gate and up interleaved
  const at::Tensor gate = gate_up.slice(-1, 0, c10::nullopt, 2).clamp_max(limit_);
  const at::Tensor up = gate_up.slice(-1, 1, c10::nullopt, 2).clamp(-limit_, limit_);
  return down_proj->forward((up + 1) * (gate * at::sigmoid(gate * alpha_)));
}

std::vector<ExpertCoverage> GptOssDecoderLayer::FinishCalibration() {
  ExpertCoverage coverage = moe->FinishCoverage();
  coverage.block = prefix() + "mlp";
  coverage.experts = expert_names_;
  return {std::move(coverage)};
}

absl::StatusOr<std::vector<std::shared_ptr<LinearLike>>> GptOssDecoderLayer::LoadExpertLinears(
    const checkpoint::GptOssConfig& config, const WeightSource& weights, at::ScalarType dtype) const {
  // A tensor served per expert (an HF-quark export; Mxfp4ExpertSource dequantizing one expert at a time; weights an
  // algorithm rewrote) is read by its name; any other is the slice of HF's fused tensor (x @ W: weights transposed),
  // read where it is stored (zero copy from a mapped checkpoint) and copied into `dtype` one expert at a time.
  const std::vector<checkpoint::TensorSpec> fused_specs = checkpoint::GptOssExpertTensors(config, index());
  std::vector<at::Tensor> fused(fused_specs.size());
  const auto slice = [&](size_t k, int64_t e) -> absl::StatusOr<at::Tensor> {
    if (!fused[k].defined()) {
      auto tensor = weights.GetStored(fused_specs[k].name);
      if (!tensor.ok()) return tensor.status();
      if (tensor->sizes() != at::IntArrayRef(fused_specs[k].shape)) {
        return absl::InvalidArgumentError(StrCat("tensor \"", fused_specs[k].name, "\" has shape [",
                                                 StrJoin(tensor->sizes(), ", "), "] but config.json implies [",
                                                 StrJoin(fused_specs[k].shape, ", "), "]"));
      }
      fused[k] = *std::move(tensor);
    }
    const at::Tensor part = k % 2 == 0 ? fused[k][e].t() : fused[k][e];  // [in, out] -> [out, in]; bias rows
    return at::empty(part.sizes(), part.options().dtype(dtype)).copy_(part);
  };
  const std::vector<checkpoint::LinearSpec> specs = checkpoint::GptOssLayerLinears(config);  // q, k, v, o, experts
  std::vector<std::shared_ptr<LinearLike>> out;
  // #32 item 5: experts streamed in groups load by their own names (the checkpoint's source serves each expert's
  // slice: GptOssFloatExpertSource, Mxfp4ExpertSource) when their expert is acquired.
  const bool streamed = ExpertStreamingOf(weights) != nullptr;
  for (int64_t e = 0; e < config.num_local_experts; ++e) {
    for (size_t proj = 0; proj < 2; ++proj) {  // gate_up_proj (fused tensors 0, 1), down_proj (2, 3)
      const checkpoint::LinearSpec& spec = specs[4 + 2 * e + proj];
      const std::string name = prefix() + spec.relative_name;
      if (streamed && spec.routed) {
        auto linear = LoadLinear(weights, prefix(), spec, dtype);
        if (!linear.ok()) return linear.status();
        out.push_back(*std::move(linear));
        continue;
      }
      at::Tensor parts[2];
      for (size_t k = 0; k < 2; ++k) {
        const std::string tensor = name + (k == 0 ? ".weight" : ".bias");
        const std::vector<int64_t> shape = k == 0 ? std::vector<int64_t>{spec.out_features, spec.in_features}
                                                  : std::vector<int64_t>{spec.out_features};
        auto loaded = weights.Has(tensor) ? LoadChecked(weights, tensor, shape, dtype) : slice(2 * proj + k, e);
        if (!loaded.ok()) return loaded.status();
        parts[k] = *std::move(loaded);
      }
      out.push_back(std::make_shared<FloatLinear>(parts[0], parts[1]));
    }
  }
  return out;
}

absl::Status GptOssDecoderLayer::LoadExperts(const checkpoint::GptOssConfig& config, const WeightSource& weights,
                                             at::ScalarType dtype) {
  const int64_t experts = config.num_local_experts, hidden = config.base.hidden_size;
  auto router = LoadChecked(weights, prefix() + "mlp.router.weight", {experts, hidden}, dtype);
  if (!router.ok()) return router.status();
  auto router_bias = LoadChecked(weights, prefix() + "mlp.router.bias", {experts}, dtype);
  if (!router_bias.ok()) return router_bias.status();
  moe = std::make_shared<MoeBlock>(*router, config.num_experts_per_tok, /*norm_topk_prob=*/false, at::Tensor());
  moe->set_routing(GptOssRouting(config.num_experts_per_tok, *router_bias));
  auto linears = LoadExpertLinears(config, weights, dtype);
  if (!linears.ok()) return linears.status();
  auto list = std::make_shared<ExpertList>();
  for (int64_t e = 0; e < experts; ++e) {
    auto expert = std::make_shared<GptOssExpert>(config.swiglu_alpha, config.swiglu_limit);
    expert->gate_up_proj = (*linears)[2 * e];
    expert->down_proj = (*linears)[2 * e + 1];
    moe->experts.push_back(list->register_module(std::to_string(e), expert));
    expert_names_.push_back(StrCat(prefix(), "mlp.experts.", e));
    AddLinear(StrCat("mlp.experts.", e, ".gate_up_proj"), *expert, "gate_up_proj", &expert->gate_up_proj);
    AddLinear(StrCat("mlp.experts.", e, ".down_proj"), *expert, "down_proj", &expert->down_proj);
  }
  moe->register_module("experts", list);
  register_module("mlp", moe);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<GptOssDecoderLayer>> GptOssDecoderLayer::Load(const checkpoint::GptOssConfig& config,
                                                                             int64_t index, const WeightSource& weights,
                                                                             at::ScalarType dtype) {
  const checkpoint::ModelConfig& base = config.base;
  if (index < 0 || index >= base.num_hidden_layers) {
    return absl::OutOfRangeError(StrCat("layer ", index, " outside [0, ", base.num_hidden_layers, ")"));
  }
  std::shared_ptr<GptOssDecoderLayer> layer(new GptOssDecoderLayer(index, checkpoint::LayerPrefix(base, index)));
  auto norms = LoadPreNorms(base, layer->prefix(), weights, dtype);
  if (!norms.ok()) return norms.status();
  layer->input_layernorm = layer->register_module("input_layernorm", norms->input_layernorm);
  auto sinks = LoadChecked(weights, layer->prefix() + "self_attn.sinks", {base.num_attention_heads}, dtype);
  if (!sinks.ok()) return sinks.status();
  auto attn = std::make_shared<GptOssAttention>(config, *sinks, config.LayerWindow(index));
  layer->self_attn = layer->register_module("self_attn", attn);
  std::shared_ptr<LinearLike>* slots[] = {&attn->q_proj, &attn->k_proj, &attn->v_proj, &attn->o_proj};
  const std::vector<checkpoint::LinearSpec> specs = checkpoint::GptOssLayerLinears(config);
  for (int i = 0; i < 4; ++i) {
    auto linear = LoadLinear(weights, layer->prefix(), specs[i], dtype);
    if (!linear.ok()) return linear.status();
    *slots[i] = *std::move(linear);
    const std::string& rel = specs[i].relative_name;
    layer->AddLinear(rel, *attn, rel.substr(rel.rfind('.') + 1), slots[i]);
  }
  layer->post_attention_layernorm = layer->register_module("post_attention_layernorm", norms->post_attention_layernorm);
  if (auto s = layer->LoadExperts(config, weights, dtype); !s.ok()) return s;
  return layer;
}

}  // namespace quark::runtime
