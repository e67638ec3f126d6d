// gpt-oss (`model_type` gpt_oss, HF transformers' models/gpt_oss): the parts of its config.json beyond a Llama's.
// Attention with learned sinks and biases, alternating sliding-window / full layers (`layer_types`), MoE in every
// layer (router with bias, top-k of the logits then softmax over those k, experts with biases and the clamped
// SwiGLU on interleaved gate/up columns), YaRN RoPE. Kept apart from ModelConfig as DeepseekConfig is; `base` carries
// the fields every family shares.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "core/checkpoint/model_config.h"
#include "core/checkpoint/yarn_config.h"

namespace quark::checkpoint {

struct GptOssConfig {
  /// model_type "gpt_oss"; hidden_size, intermediate_size (one expert's width), num_hidden_layers, heads, KV heads,
  /// head_dim (given apart from hidden_size: 64 with hidden 2880), vocab_size, max_position_embeddings, rms_norm_eps,
  /// rope_theta, tie_word_embeddings, token ids, torch_dtype; attention_bias = o_proj_bias (q, k, v and o together,
  /// HF's default true); sliding_window (0 = null) and sliding_window_layers from layer_types (HF's default: even
  /// layers sliding, odd layers full).
  ModelConfig base;
  int64_t num_local_experts = 0;
  int64_t num_experts_per_tok = 0;
  /// The experts' clamped SwiGLU: gate = min(gate, limit), up = clamp(up, -limit, limit),
  /// out = (up + 1) * gate * sigmoid(alpha * gate).
  double swiglu_alpha = 1.702;
  double swiglu_limit = 7.0;
  std::optional<YarnScaling> yarn;
  /// quantization_config {"quant_method": "mxfp4"}: the experts are stored as MXFP4 blocks and scales
  /// (runtime/mxfp4_expert_source.h reads them); everything else is float.
  bool mxfp4_experts = false;

  /// The attention window of `layer` (0 = full attention).
  int64_t LayerWindow(int64_t layer) const { return LayerAttentionWindow(base, layer); }
};

/// Whether `model_type` is one this parser reads ("gpt_oss").
bool IsGptOssModelType(const std::string& model_type);

/// Parses a gpt_oss config.json. Errors name the field and value: missing or non-positive sizes, num_experts_per_tok
/// above num_local_experts, layer_types of the wrong length or with unknown entries, a sliding layer without a
/// sliding_window, a rope_scaling type other than yarn, hidden_act other than silu, a non-positive swiglu_limit or
/// swiglu_alpha, a non-zero attention_dropout, a quantization_config other than {"quant_method": "mxfp4"} (or "quark",
/// an HF-quark export) or one whose modules_to_not_convert names the experts.
absl::StatusOr<GptOssConfig> ParseGptOssConfig(const std::string& json_text, const std::string& label = "config.json");

/// HF config.json text for `config` (what `quark make-model --arch gpt_oss` writes).
std::string GptOssConfigToJson(const GptOssConfig& config);

}  // namespace quark::checkpoint
