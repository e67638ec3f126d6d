// DeepSeek-V3 / R1 (`model_type` deepseek_v3): the parts of its HF config.json beyond a Llama's. Multi-head latent
// attention (MLA), MoE with shared experts, sigmoid scoring with e_score_correction_bias, group-limited top-k, YaRN.
// Kept apart from ModelConfig (the dense and MoE families' parser) so that the families built before need nothing of
// it; `base` carries the fields every family shares (sizes, norms, token ids).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "core/checkpoint/model_config.h"
#include "core/checkpoint/yarn_config.h"

namespace quark::checkpoint {

struct DeepseekConfig {
  /// model_type "deepseek_v3"; hidden_size, intermediate_size (the dense layers' MLP), num_hidden_layers (without
  /// the MTP layers), num_attention_heads (= num_key_value_heads), vocab_size, max_position_embeddings, rms_norm_eps,
  /// rope_theta, tie_word_embeddings, token ids, torch_dtype. head_dim = qk_rope_head_dim (HF's).
  ModelConfig base;
  int64_t q_lora_rank = 0;  // 0 = null: a plain q_proj (DeepSeek-V2-Lite style)
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  int64_t n_routed_experts = 0;
  int64_t n_shared_experts = 0;  // the shared expert is moe_intermediate_size * n_shared_experts wide
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  int64_t n_group = 1;
  int64_t topk_group = 1;
  int64_t first_k_dense_replace = 0;  // layers [0, k) have a dense MLP, the others the MoE
  int64_t num_nextn_predict_layers = 0;  // MTP layers stored after the decoder layers; never in the forward
  double routed_scaling_factor = 1.0;
  bool norm_topk_prob = true;
  /// HF's rope_interleave (default true): the checkpoint's rope dimensions are pairs (x0, x1), (x2, x3), ... as in
  /// DeepSeek's own code, which HF de-interleaves before its rotate-half RoPE.
  bool rope_interleave = true;
  std::optional<YarnScaling> yarn;

  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  bool IsMoeLayer(int64_t layer) const { return layer >= first_k_dense_replace; }
};

/// Whether `model_type` is one this parser reads ("deepseek_v3").
bool IsDeepseekModelType(const std::string& model_type);

/// Parses a deepseek_v3 config.json. Errors name the field and value: missing or non-positive sizes, heads other
/// than num_key_value_heads, a rope_scaling type other than yarn, scoring_func other than sigmoid, topk_method other
/// than noaux_tc, n_group not dividing n_routed_experts, topk_group outside [1, n_group], top-k above what the
/// chosen groups hold, moe_layer_freq other than 1, first_k_dense_replace above the layer count, an odd
/// qk_rope_head_dim, hidden_act other than silu, a non-positive routed_scaling_factor.
absl::StatusOr<DeepseekConfig> ParseDeepseekConfig(const std::string& json_text, const std::string& label = "config.json");

/// HF config.json text for `config` (what `quark make-model --arch deepseek_v3` writes).
std::string DeepseekConfigToJson(const DeepseekConfig& config);

}  // namespace quark::checkpoint
