// The Llama-family decoder layer (llama, mistral, qwen2, qwen3 with its q/k norms): RMSNorm, RoPE attention with grouped KV heads,
// SwiGLU MLP. Children carry HF's names: input_layernorm, self_attn.{q,k,v,o}_proj, post_attention_layernorm,
// mlp.{gate,up,down}_proj.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/checkpoint/model_config.h"
#include "core/runtime/attention.h"
#include "core/runtime/decoder_layer.h"
#include "core/runtime/weight_source.h"

namespace quark::runtime {

class LlamaAttention : public torch::nn::Module {
 public:
  std::shared_ptr<LinearLike> q_proj, k_proj, v_proj, o_proj;
  /// Qwen3's per-head RMSNorms (weight [head_dim]) on q and k before RoPE; null when the model has none.
  std::shared_ptr<RmsNorm> q_norm, k_norm;
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
  int64_t window = 0;  // sliding window of this layer (0 = none): attends with context.sliding_mask
  /// Where vLLM quantizes K for its cache (#33 item 4): when set, K [B, kv_heads, T, head_dim] goes through it after
  /// RoPE (an export's evaluation, quantize/reload.h); unset, K is what k_proj gives (Quark's output quantizer there
  /// quantizes before RoPE). May throw c10::Error like any module.
  std::function<at::Tensor(const at::Tensor&)> key_cache_quantizer;
  /// x [B, T, hidden] -> [B, T, hidden]. Throws c10::Error when the layer has a window the context was not
  /// built for (a model/context mix-up, not bad input).
  at::Tensor forward(const at::Tensor& x, const LayerContext& context);
};

class LlamaMlp : public torch::nn::Module {
 public:
  std::shared_ptr<LinearLike> gate_proj, up_proj, down_proj;
  at::Tensor forward(const at::Tensor& x);
};

/// The Llama-family attention of layer `index` without its linears: head counts, the layer's window, and Qwen3's
/// per-head q_norm/k_norm loaded from `prefix` when config.qk_norm. Shared by the dense and MoE layers.
absl::StatusOr<std::shared_ptr<LlamaAttention>> NewLlamaAttention(const checkpoint::ModelConfig& config, int64_t index,
                                                                  const std::string& prefix, const WeightSource& weights,
                                                                  at::ScalarType dtype);

/// A pre-norm layer's two RMSNorms (input_layernorm before attention, post_attention_layernorm before the MLP).
struct PreNorms {
  std::shared_ptr<RmsNorm> input_layernorm, post_attention_layernorm;
};
absl::StatusOr<PreNorms> LoadPreNorms(const checkpoint::ModelConfig& config, const std::string& prefix,
                                      const WeightSource& weights, at::ScalarType dtype);

class LlamaDecoderLayer : public DecoderLayer {
 public:
  /// Loads layer `index` from `weights` as `dtype`; errors name the missing or mis-shaped tensor.
  static absl::StatusOr<std::shared_ptr<LlamaDecoderLayer>> Load(const checkpoint::ModelConfig& config, int64_t index,
                                                                 const WeightSource& weights, at::ScalarType dtype);
  at::Tensor forward(const at::Tensor& hidden, const LayerContext& context) override;

  std::shared_ptr<RmsNorm> input_layernorm, post_attention_layernorm;
  std::shared_ptr<LlamaAttention> self_attn;
  std::shared_ptr<LlamaMlp> mlp;

 private:
  LlamaDecoderLayer(int64_t index, std::string prefix) : DecoderLayer(index, std::move(prefix)) {}
};

}  // namespace quark::runtime
