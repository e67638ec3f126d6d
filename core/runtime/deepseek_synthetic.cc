#include "core/runtime/deepseek_synthetic.h"

#include "core/base/strings.h"

namespace quark::runtime {
namespace {

struct DeepseekShape {
  const char* name;
  int64_t hidden, intermediate, layers, heads, vocab, max_positions;
  int64_t q_lora, kv_lora, nope, rope, v;
  int64_t experts, shared, top_k, groups, top_groups, moe_intermediate, dense_layers, mtp_layers;
  double routed_scaling;
  // YaRN
  double factor;
  int64_t original_positions;
  double mscale, mscale_all_dim;
  int64_t bos, eos;
};

// deepseek-v3: DeepSeek-V3's (and R1's) config.json. tiny: v_head_dim apart from the q/k head size, mscale apart from
// mscale_all_dim (so YaRN's attention_factor is not 1), groups that leave some experts unreachable per token.
constexpr DeepseekShape kDeepseekShapes[] = {
    {"tiny", 64, 128, 3, 4, 512, 2048, 32, 32, 16, 8, 16, 16, 1, 4, 4, 2, 32, 1, 1, 2.5, 4.0, 512, 1.0, 0.8, 0, 1},
    // q_lora_rank null (a plain q_proj, as DeepSeek-V2-Lite), 2 shared experts, 8 experts in 2 groups of which 1 kept.
    {"tiny-q-proj", 64, 128, 3, 4, 512, 2048, 0, 32, 16, 8, 32, 8, 2, 2, 2, 1, 32, 1, 0, 1.5, 4.0, 512, 1.0, 1.0, 0, 1},
    {"deepseek-v3", 7168, 18432, 61, 128, 129280, 163840, 1536, 512, 128, 64, 128, 256, 1, 8, 8, 4, 2048, 3, 1, 2.5,
     40.0, 4096, 1.0, 1.0, 0, 1},
    {"deepseek-v3-4l", 7168, 18432, 4, 128, 129280, 163840, 1536, 512, 128, 64, 128, 256, 1, 8, 8, 4, 2048, 3, 0, 2.5,
     40.0, 4096, 1.0, 1.0, 0, 1},
};

}  // namespace

std::vector<std::string> DeepseekSyntheticShapes(const std::string& arch) {
  std::vector<std::string> names;
  if (arch != "deepseek_v3") return names;
  for (const DeepseekShape& s : kDeepseekShapes) names.push_back(s.name);
  return names;
}

absl::StatusOr<checkpoint::DeepseekConfig> DeepseekSyntheticConfig(const std::string& shape, const std::string& torch_dtype) {
  for (const DeepseekShape& s : kDeepseekShapes) {
    if (shape != s.name) continue;
    checkpoint::DeepseekConfig c;
    checkpoint::ModelConfig& b = c.base;
    b.model_type = "deepseek_v3";
    b.hidden_size = s.hidden;
    b.intermediate_size = s.intermediate;
    b.num_hidden_layers = s.layers;
    b.num_attention_heads = b.num_key_value_heads = s.heads;
    b.head_dim = s.rope;
    b.vocab_size = s.vocab;
    b.max_position_embeddings = s.max_positions;
    b.rms_norm_eps = 1e-6;
    b.rope_theta = 10000.0;
    b.bos_token_id = s.bos;
    b.eos_token_id = s.eos;
    b.torch_dtype = torch_dtype;
    c.q_lora_rank = s.q_lora;
    c.kv_lora_rank = s.kv_lora;
    c.qk_nope_head_dim = s.nope;
    c.qk_rope_head_dim = s.rope;
    c.v_head_dim = s.v;
    c.n_routed_experts = s.experts;
    c.n_shared_experts = s.shared;
    c.num_experts_per_tok = s.top_k;
    c.n_group = s.groups;
    c.topk_group = s.top_groups;
    c.moe_intermediate_size = s.moe_intermediate;
    c.first_k_dense_replace = s.dense_layers;
    c.num_nextn_predict_layers = s.mtp_layers;
    c.routed_scaling_factor = s.routed_scaling;
    checkpoint::YarnScaling yarn;
    yarn.factor = s.factor;
    yarn.original_max_position_embeddings = s.original_positions;
    yarn.mscale = s.mscale;
    yarn.mscale_all_dim = s.mscale_all_dim;
    c.yarn = yarn;
    return c;
  }
  return absl::InvalidArgumentError(StrCat("shape \"", shape, "\" is not known for arch deepseek_v3 (known: ",
                                           StrJoin(DeepseekSyntheticShapes("deepseek_v3"), ", "), ")"));
}

}  // namespace quark::runtime
