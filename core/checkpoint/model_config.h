// An HF `config.json`, reduced to what the runtime needs to build and run the model.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace quark::checkpoint {

struct DeepseekConfig;  // deepseek_config.h
struct Llama4Config;    // llama4_config.h
struct GptOssConfig;    // gpt_oss_config.h

/// The architecture families the runtime can build.
enum class ArchFamily {
  kLlama,  // model_type llama, mistral, qwen2, qwen3 (RMSNorm, RoPE, SwiGLU, GQA)
  kOpt,    // model_type opt (LayerNorm, learned positions, ReLU, biases)
  kPhi3,   // model_type phi3: Llama's math with fused self_attn.qkv_proj and mlp.gate_up_proj
  kMoe,    // model_type mixtral, qwen2_moe, qwen3_moe: Llama-family attention, routed experts instead of the MLP
  kGemma,  // model_type gemma2, gemma3_text: (1 + w) RMSNorm, GELU-tanh, four norms per layer, soft-capping
  kDeepseek,  // model_type deepseek_v3: MLA, dense then MoE layers with shared experts (ModelConfig::deepseek)
  kLlama4,    // model_type llama4_text: MoE interleaved with dense layers, chunked and NoPE attention (ModelConfig::llama4)
  kGptOss,    // model_type gpt_oss: attention sinks, sliding/full layers, MoE with biases, YaRN (ModelConfig::gpt_oss)
};

/// The `model_type` values accepted, comma-separated (for error messages and help text).
const char* SupportedModelTypes();

/// Llama 3 `rope_scaling` ({"rope_type": "llama3", factor, low_freq_factor, high_freq_factor,
/// original_max_position_embeddings}); "linear" scaling is also understood (positions divided by factor).
struct RopeScaling {
  std::string rope_type;  // "llama3" or "linear"
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct ModelConfig {
  std::string model_type;  // as in config.json
  ArchFamily family = ArchFamily::kLlama;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;  // OPT: ffn_dim
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;  // = num_attention_heads when absent (and always for OPT)
  int64_t head_dim = 0;             // hidden_size / num_attention_heads unless given
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;  // Llama family
  double layer_norm_eps = 1e-5;  // OPT
  double rope_theta = 10000.0;
  std::optional<RopeScaling> rope_scaling;
  /// Sliding-window attention (mistral; qwen2 with use_sliding_window): a query at position i sees keys j with
  /// i - sliding_window < j <= i. 0 = no window (config null or absent, or qwen2 with use_sliding_window false).
  int64_t sliding_window = 0;
  /// Which layers use the window: empty = every layer (mistral); else one entry per layer (qwen2: from
  /// `layer_types`, else layers >= max_window_layers). Read it through LayerAttentionWindow().
  std::vector<bool> sliding_window_layers;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v/o biases (qwen2: q/k/v only)
  bool o_proj_bias = false;
  bool mlp_bias = false;
  /// Qwen3: per-head RMSNorm (self_attn.q_norm / k_norm, weight [head_dim]) on q and k before RoPE.
  bool qk_norm = false;
  /// Gemma 2 / Gemma 3 (family kGemma; gemma_config.h). Attention scale query_pre_attn_scalar**-0.5; soft-caps
  /// 0 = none (cap * tanh(x / cap) on the attention scores before the mask, and on the final logits); RoPE base of
  /// the sliding-window layers (Gemma 3's rope_local_base_freq, unscaled), 0 = the global rope_theta/rope_scaling.
  double query_pre_attn_scalar = 0;
  double attn_logit_softcapping = 0;
  double final_logit_softcapping = 0;
  double rope_local_base_freq = 0;
  std::string hidden_act = "silu";
  int64_t bos_token_id = -1;  // -1 = none
  int64_t eos_token_id = -1;  // first of a list
  std::string torch_dtype;    // "float32", "bfloat16", "float16" or empty
  // OPT only.
  bool do_layer_norm_before = true;
  int64_t word_embed_proj_dim = 0;  // = hidden_size when absent
  bool enable_bias = true;
  bool layer_norm_elementwise_affine = true;
  // Mixture of experts only (family kMoe; moe_config.h parses and writes these).
  int64_t num_experts = 0;            // mixtral: num_local_experts; qwen: num_experts
  int64_t num_experts_per_tok = 0;    // top-k
  int64_t moe_intermediate_size = 0;  // one expert's width (mixtral: intermediate_size)
  int64_t shared_expert_intermediate_size = 0;  // qwen2_moe's shared expert (gated by sigmoid); 0 = none
  bool norm_topk_prob = true;         // renormalize the top-k routing weights to sum 1 (mixtral: always)
  /// DeepSeek-V3 only (family kDeepseek): the whole parsed config (deepseek_config.h); the fields above are a copy
  /// of its `base`, num_experts/num_experts_per_tok/moe_intermediate_size its routed experts'.
  std::shared_ptr<const DeepseekConfig> deepseek;
  /// Llama 4 text only (family kLlama4): the whole parsed config (llama4_config.h); the fields above are its `base`,
  /// num_experts/num_experts_per_tok/moe_intermediate_size its routed experts'.
  std::shared_ptr<const Llama4Config> llama4;
  /// gpt-oss only (family kGptOss): the whole parsed config (gpt_oss_config.h); the fields above are its `base`,
  /// num_experts/num_experts_per_tok/moe_intermediate_size its experts'.
  std::shared_ptr<const GptOssConfig> gpt_oss;
};

/// Parses config.json text. Errors name the field and value: missing or non-positive sizes, a hidden size
/// not divisible by the head count, heads not divisible by KV heads, an unknown model_type (listing
/// SupportedModelTypes()), an unknown rope_scaling type, an unsupported hidden_act, a non-positive or
/// non-integer sliding_window where it is used, a layer_types list of the wrong length or with unknown entries.
absl::StatusOr<ModelConfig> ParseModelConfig(const std::string& json_text, const std::string& label = "config.json");

/// The attention window of decoder layer `layer`: config.sliding_window where that layer uses it, else 0 (none).
int64_t LayerAttentionWindow(const ModelConfig& config, int64_t layer);

/// Reads and parses `model_dir`/config.json.
absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& model_dir);

/// HF config.json text for `config` (what `quark make-model` writes): architectures, model_type and every
/// field above under its HF name.
std::string ModelConfigToJson(const ModelConfig& config);

}  // namespace quark::checkpoint
