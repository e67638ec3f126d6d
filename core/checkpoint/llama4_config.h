// Llama 4 text (`model_type` llama4_text, HF's Llama4TextConfig): the parts of its config.json beyond a Llama's. MoE
// layers (num_local_experts routed experts, sigmoid top-k routing applied to the experts' input, one shared expert)
// interleaved with dense layers (intermediate_size_mlp wide); RoPE layers with chunked attention and an L2 QK norm,
// NoPE layers with full attention and attention temperature tuning. Kept apart from ModelConfig like DeepSeek's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checkpoint/model_config.h"

namespace quark::checkpoint {

struct Llama4Config {
  /// model_type "llama4_text"; hidden_size, intermediate_size (one expert's and the shared expert's width),
  /// num_hidden_layers, heads, head_dim, vocab, rms_norm_eps, rope_theta and Llama 3 rope_scaling, attention_bias,
  /// tie_word_embeddings, token ids, torch_dtype.
  ModelConfig base;
  int64_t intermediate_size_mlp = 0;  // the dense layers' MLP width
  int64_t num_local_experts = 0;
  int64_t num_experts_per_tok = 1;
  std::vector<bool> moe_layers;      // per layer: an MoE feed_forward (else a dense MLP)
  std::vector<bool> rope_layers;     // per layer: HF's no_rope_layers[i] (1 = the layer applies RoPE)
  std::vector<bool> chunked_layers;  // per layer: layer_types[i] == "chunked_attention"
  int64_t attention_chunk_size = 0;  // 0 = null (then no layer may be chunked)
  bool use_qk_norm = true;           // L2 norm of q and k after RoPE, in the RoPE layers only
  bool attn_temperature_tuning = true;  // NoPE layers: q *= log1p(floor((pos + 1) / floor_scale)) * attn_scale + 1
  double floor_scale = 8192;
  double attn_scale = 0.1;

  bool IsMoeLayer(int64_t layer) const { return moe_layers[layer]; }
  bool UsesRope(int64_t layer) const { return rope_layers[layer]; }
};

/// Whether `model_type` is one this parser reads ("llama4_text").
bool IsLlama4ModelType(const std::string& model_type);

/// Parses a llama4_text config.json with HF's defaults (moe_layers from interleave_moe_layer_step, no_rope_layers from
/// no_rope_layer_interval, layer_types from no_rope_layers). Errors name the field and value: missing or non-positive
/// sizes, hidden_act other than silu, moe_layers / no_rope_layers / layer_types of the wrong length or with entries
/// outside their range, chunked layers without attention_chunk_size, a non-positive floor_scale, rope_parameters or
/// rope_scaling of a type other than default / llama3 / linear, and model_type "llama4" (the multimodal wrapper:
/// its text_config is the llama4_text model, under language_model.* names this reader does not map).
absl::StatusOr<Llama4Config> ParseLlama4Config(const std::string& json_text, const std::string& label = "config.json");

/// HF config.json text for `config` (what `quark make-model --arch llama4` writes), every per-layer list explicit.
std::string Llama4ConfigToJson(const Llama4Config& config);

}  // namespace quark::checkpoint
