#include "core/checkpoint/moe_layout.h"

#include "core/base/strings.h"

namespace quark::checkpoint {

std::string MoeBlockName(const ModelConfig& config) {
  return config.model_type == "mixtral" ? "block_sparse_moe" : "mlp";
}

std::string MoeExpertName(const ModelConfig& config, int64_t expert) {
  return quark::StrCat(MoeBlockName(config), ".experts.", expert);
}

std::string MoeSharedExpertName(const ModelConfig& config) {
  return config.shared_expert_intermediate_size > 0 ? "mlp.shared_expert" : "";
}

ExpertProjectionNames MoeExpertProjections(const ModelConfig& config) {
  if (config.model_type == "mixtral") return {"w1", "w3", "w2"};
  return {"gate_proj", "up_proj", "down_proj"};
}

std::vector<LinearSpec> MoeMlpLinears(const ModelConfig& c) {
  const int64_t h = c.hidden_size;
  std::vector<LinearSpec> out;
  const std::string shared = MoeSharedExpertName(c);
  if (!shared.empty()) {
    const int64_t inter = c.shared_expert_intermediate_size;
    out.push_back({shared + ".gate_proj", inter, h, false, "post_attention_layernorm"});
    out.push_back({shared + ".up_proj", inter, h, false, "post_attention_layernorm"});
    out.push_back({shared + ".down_proj", h, inter, false, shared + ".act_fn"});
  }
  const ExpertProjectionNames p = MoeExpertProjections(c);
  const int64_t inter = c.moe_intermediate_size;
  for (int64_t e = 0; e < c.num_experts; ++e) {
    const std::string expert = MoeExpertName(c, e);
    out.push_back({expert + "." + p.gate, inter, h, false, expert, /*routed=*/true});
    out.push_back({expert + "." + p.up, inter, h, false, expert, /*routed=*/true});
    out.push_back({expert + "." + p.down, h, inter, false, expert + ".act_fn", /*routed=*/true});
  }
  return out;
}

std::vector<TensorSpec> MoeRouterTensors(const ModelConfig& c, int64_t layer) {
  const std::string prefix = LayerPrefix(c, layer);
  std::vector<TensorSpec> out;
  out.push_back({prefix + MoeBlockName(c) + ".gate.weight", {c.num_experts, c.hidden_size}, TensorRole::kRouterWeight});
  if (!MoeSharedExpertName(c).empty()) {
    out.push_back({prefix + "mlp.shared_expert_gate.weight", {1, c.hidden_size}, TensorRole::kRouterWeight});
  }
  return out;
}

}  // namespace quark::checkpoint
