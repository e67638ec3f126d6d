#include "core/runtime/llama4_layer.h"

#include <utility>

#include "core/base/strings.h"
#include "core/checkpoint/llama4_layout.h"
#include "core/runtime/expert_slots.h"
#include "core/runtime/matmul_precision.h"
#include "core/runtime/module_loader.h"

namespace quark::runtime {
MoeBlock::RoutingFunction Llama4Routing(int64_t top_k) {
  return [top_k](const at::Tensor& flat, const at::Tensor& router) {
    const at::Tensor logits = ComputeLinear(flat, router, at::Tensor());  // [N, E], x's dtype
    auto [top, selected] = logits.topk(top_k, /*dim=*/1);                 // [N, k]
    const at::ScalarType precision = at::promote_types(flat.scalar_type(), at::kFloat);
    const at::Tensor weights = top.to(precision).sigmoid().to(flat.scalar_type());
    return MoeBlock::Routing{logits.to(at::kFloat).sigmoid(), weights, selected};
  };
}

std::vector<ExpertCoverage> Llama4DecoderLayer::FinishCalibration() {
  if (!moe) return {};
  ExpertCoverage coverage = moe->FinishCoverage();
  coverage.block = prefix() + "feed_forward";
  coverage.experts = expert_names_;
  return {std::move(coverage)};
}

absl::Status Llama4DecoderLayer::LoadFeedForward(const checkpoint::Llama4Config& config, const WeightSource& weights,
                                                 at::ScalarType dtype) {
  if (!config.IsMoeLayer(index())) {
    mlp = register_module("feed_forward", std::make_shared<LlamaMlp>());
    return absl::OkStatus();
  }
  for (const char* fused : {"feed_forward.experts.gate_up_proj", "feed_forward.experts.down_proj"}) {
    if (weights.Has(prefix() + fused)) {
      return absl::UnimplementedError(StrCat(prefix(), fused, ": HF's fused expert tensors are not read (the experts are "
                                             "read as feed_forward.experts.E.{gate,up,down}_proj.weight, the unfused "
                                             "layout of quantized Llama 4 checkpoints)"));
    }
  }
  const int64_t experts = config.num_local_experts;
  auto router = LoadChecked(weights, prefix() + "feed_forward.router.weight", {experts, config.base.hidden_size}, dtype);
  if (!router.ok()) return router.status();
  moe = std::make_shared<MoeBlock>(*router, config.num_experts_per_tok, /*norm_topk_prob=*/false, at::Tensor());
  moe->set_routing(Llama4Routing(config.num_experts_per_tok));
  moe->set_weights_scale_inputs(true);
  expert_names_ = AddExperts(*moe, experts, "shared_expert", prefix() + "feed_forward");
  register_module("feed_forward", moe);
  return absl::OkStatus();
}

absl::Status Llama4DecoderLayer::LoadLinears(const checkpoint::Llama4Config& config, const WeightSource& weights,
                                             at::ScalarType dtype) {
  // Each linear's slot and owner, by relative name (Llama4LayerLinears gives names, shapes and order).
  Llama4Attention& attn = *self_attn;
  LinearSlots slots = {{"self_attn.q_proj", {&attn, &attn.q_proj}}, {"self_attn.k_proj", {&attn, &attn.k_proj}},
                       {"self_attn.v_proj", {&attn, &attn.v_proj}}, {"self_attn.o_proj", {&attn, &attn.o_proj}}};
  if (mlp) AddSwigluSlots(slots, "feed_forward", *mlp, &mlp->gate_proj, &mlp->up_proj, &mlp->down_proj);
  if (moe) AddMoeSlots(slots, "feed_forward", "shared_expert", *moe);
  for (const checkpoint::LinearSpec& spec : checkpoint::Llama4LayerLinears(config, index())) {
    auto it = slots.find(spec.relative_name);
    if (it == slots.end()) return absl::InternalError(StrCat(prefix(), spec.relative_name, ": no slot in the layer"));
    auto linear = LoadLinear(weights, prefix(), spec, dtype);
    if (!linear.ok()) return linear.status();
    *it->second.second = *std::move(linear);
    const std::string& rel = spec.relative_name;
    AddLinear(rel, *it->second.first, rel.substr(rel.rfind('.') + 1), it->second.second);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Llama4DecoderLayer>> Llama4DecoderLayer::Load(const checkpoint::Llama4Config& config,
                                                                             int64_t index, const WeightSource& weights,
                                                                             at::ScalarType dtype) {
  if (index < 0 || index >= config.base.num_hidden_layers) {
    return absl::OutOfRangeError(StrCat("layer ", index, " outside [0, ", config.base.num_hidden_layers, ")"));
  }
  std::shared_ptr<Llama4DecoderLayer> layer(new Llama4DecoderLayer(index, checkpoint::LayerPrefix(config.base, index)));
  auto norms = LoadPreNorms(config.base, layer->prefix(), weights, dtype);
  if (!norms.ok()) return norms.status();
  layer->input_layernorm = layer->register_module("input_layernorm", norms->input_layernorm);
  layer->self_attn = layer->register_module("self_attn", std::make_shared<Llama4Attention>(config, index));
  layer->post_attention_layernorm = layer->register_module("post_attention_layernorm", norms->post_attention_layernorm);
  if (auto s = layer->LoadFeedForward(config, weights, dtype); !s.ok()) return s;
  if (auto s = layer->LoadLinears(config, weights, dtype); !s.ok()) return s;
  return layer;
}

}  // namespace quark::runtime
