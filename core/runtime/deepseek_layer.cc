#include "core/runtime/deepseek_layer.h"

#include "core/base/strings.h"
#include "core/checkpoint/deepseek_layout.h"
#include "core/runtime/expert_slots.h"
#include "core/runtime/module_loader.h"

namespace quark::runtime {
MoeBlock::RoutingFunction DeepseekRouting(const checkpoint::DeepseekConfig& config, at::Tensor correction_bias) {
  const int64_t experts = config.n_routed_experts, groups = config.n_group, top_groups = config.topk_group;
  const int64_t top_k = config.num_experts_per_tok;
  const bool renormalize = config.norm_topk_prob;
  const double scaling = config.routed_scaling_factor;
  return [=](const at::Tensor& flat, const at::Tensor& router) {
    const at::ScalarType precision = at::promote_types(flat.scalar_type(), at::kFloat);
    const at::Tensor scores = at::linear(flat.to(precision), router.to(precision)).sigmoid();  // [N, E]
    const int64_t n = scores.size(0);
    const at::Tensor choice = scores + correction_bias.to(precision).unsqueeze(0);
    const at::Tensor group_scores = std::get<0>(choice.view({n, groups, experts / groups}).topk(2, -1)).sum(-1);  // [N, G]
    const at::Tensor group_idx = std::get<1>(group_scores.topk(top_groups, -1, /*largest=*/true, /*sorted=*/false));
    const at::Tensor group_mask = at::zeros_like(group_scores).scatter_(1, group_idx, 1.0);
    const at::Tensor expert_mask = group_mask.unsqueeze(-1).expand({n, groups, experts / groups}).reshape({n, experts});
    const at::Tensor masked = choice.masked_fill(expert_mask.logical_not(), 0.0);
    const at::Tensor selected = std::get<1>(masked.topk(top_k, -1, /*largest=*/true, /*sorted=*/false));  // [N, k]
    at::Tensor weights = scores.gather(1, selected);
    if (renormalize) weights = weights / (weights.sum(-1, /*keepdim=*/true) + 1e-20);
    weights = weights * scaling;
    return MoeBlock::Routing{choice.to(at::kFloat), weights, selected};
  };
}

std::vector<ExpertCoverage> DeepseekDecoderLayer::FinishCalibration() {
  if (!moe) return {};
  ExpertCoverage coverage = moe->FinishCoverage();
  coverage.block = prefix() + "mlp";
  coverage.experts = expert_names_;
  return {std::move(coverage)};
}

absl::Status DeepseekDecoderLayer::LoadAttention(const checkpoint::DeepseekConfig& config, const WeightSource& weights,
                                                 at::ScalarType dtype) {
  auto attn = std::make_shared<DeepseekAttention>(config);
  const double eps = config.base.rms_norm_eps;
  if (config.q_lora_rank > 0) {
    auto norm = LoadChecked(weights, prefix() + "self_attn.q_a_layernorm.weight", {config.q_lora_rank}, dtype);
    if (!norm.ok()) return norm.status();
    attn->q_a_layernorm = attn->register_module("q_a_layernorm", std::make_shared<RmsNorm>(*norm, eps));
  }
  auto kv_norm = LoadChecked(weights, prefix() + "self_attn.kv_a_layernorm.weight", {config.kv_lora_rank}, dtype);
  if (!kv_norm.ok()) return kv_norm.status();
  attn->kv_a_layernorm = attn->register_module("kv_a_layernorm", std::make_shared<RmsNorm>(*kv_norm, eps));
  self_attn = register_module("self_attn", attn);
  return absl::OkStatus();
}

absl::Status DeepseekDecoderLayer::LoadMlp(const checkpoint::DeepseekConfig& config, const WeightSource& weights,
                                           at::ScalarType dtype) {
  if (!config.IsMoeLayer(index())) {
    mlp = register_module("mlp", std::make_shared<LlamaMlp>());
    return absl::OkStatus();
  }
  const int64_t experts = config.n_routed_experts;
  auto router = LoadChecked(weights, prefix() + "mlp.gate.weight", {experts, config.base.hidden_size}, dtype);
  if (!router.ok()) return router.status();
  auto bias = LoadChecked(weights, prefix() + "mlp.gate.e_score_correction_bias", {experts}, at::kFloat);
  if (!bias.ok()) return bias.status();
  moe = std::make_shared<MoeBlock>(*router, config.num_experts_per_tok, config.norm_topk_prob, at::Tensor());
  moe->set_routing(DeepseekRouting(config, *bias));
  expert_names_ = AddExperts(*moe, experts, "shared_experts", prefix() + "mlp");
  register_module("mlp", moe);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<DeepseekDecoderLayer>> DeepseekDecoderLayer::Load(const checkpoint::DeepseekConfig& config,
                                                                                 int64_t index, const WeightSource& weights,
                                                                                 at::ScalarType dtype) {
  if (index < 0 || index >= config.base.num_hidden_layers) {
    return absl::OutOfRangeError(StrCat("layer ", index, " outside [0, ", config.base.num_hidden_layers,
                                        "): the MTP layers after them are not part of the forward"));
  }
  std::shared_ptr<DeepseekDecoderLayer> layer(new DeepseekDecoderLayer(index, checkpoint::LayerPrefix(config.base, index)));
  auto norms = LoadPreNorms(config.base, layer->prefix(), weights, dtype);
  if (!norms.ok()) return norms.status();
  layer->input_layernorm = layer->register_module("input_layernorm", norms->input_layernorm);
  if (auto s = layer->LoadAttention(config, weights, dtype); !s.ok()) return s;
  layer->post_attention_layernorm = layer->register_module("post_attention_layernorm", norms->post_attention_layernorm);
  if (auto s = layer->LoadMlp(config, weights, dtype); !s.ok()) return s;

  // Each linear's slot and owner, by relative name (DeepseekLayerLinears gives names, shapes and order).
  DeepseekAttention& attn = *layer->self_attn;
  LinearSlots slots = {
      {"self_attn.q_proj", {&attn, &attn.q_proj}},       {"self_attn.q_a_proj", {&attn, &attn.q_a_proj}},
      {"self_attn.q_b_proj", {&attn, &attn.q_b_proj}},   {"self_attn.kv_a_proj_with_mqa", {&attn, &attn.kv_a_proj_with_mqa}},
      {"self_attn.kv_b_proj", {&attn, &attn.kv_b_proj}}, {"self_attn.o_proj", {&attn, &attn.o_proj}}};
  if (LlamaMlp* mlp = layer->mlp.get()) AddSwigluSlots(slots, "mlp", *mlp, &mlp->gate_proj, &mlp->up_proj, &mlp->down_proj);
  if (layer->moe) AddMoeSlots(slots, "mlp", "shared_experts", *layer->moe);
  for (const checkpoint::LinearSpec& spec : checkpoint::DeepseekLayerLinears(config, index)) {
    auto it = slots.find(spec.relative_name);
    if (it == slots.end()) return absl::InternalError(StrCat(layer->prefix(), spec.relative_name, ": no slot in the layer"));
    auto linear = LoadLinear(weights, layer->prefix(), spec, dtype);
    if (!linear.ok()) return linear.status();
    *it->second.second = *std::move(linear);
    const std::string& rel = spec.relative_name;
    layer->AddLinear(rel, *it->second.first, rel.substr(rel.rfind('.') + 1), it->second.second);
  }
  return layer;
}

}  // namespace quark::runtime
