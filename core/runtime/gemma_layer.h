// The Gemma 2 / Gemma 3 (text) decoder layer, as HF transformers' Gemma2DecoderLayer / Gemma3DecoderLayer compute
// it: four (1 + w) RMSNorms (input_layernorm before attention, post_attention_layernorm on the attention output before
// the residual add, pre_feedforward_layernorm before the MLP, post_feedforward_layernorm on its output), attention
// scaled by query_pre_attn_scalar**-0.5 with optional logit soft-capping (Gemma 2), per-head q_norm/k_norm before
// RoPE (Gemma 3), sliding-window layers with their own RoPE base (Gemma 3's rope_local_base_freq), and a GELU-tanh
// gated MLP. Children carry HF's names.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "core/checkpoint/model_config.h"
#include "core/runtime/attention.h"
#include "core/runtime/decoder_layer.h"
#include "core/runtime/weight_source.h"

namespace quark::runtime {

class GemmaAttention : public torch::nn::Module {
 public:
  std::shared_ptr<LinearLike> q_proj, k_proj, v_proj, o_proj;
  std::shared_ptr<RmsNorm> q_norm, k_norm;  // Gemma 3 only; null for Gemma 2
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
  int64_t window = 0;     // this layer's sliding window (0 = global)
  double scale = 1.0;     // query_pre_attn_scalar**-0.5
  double softcap = 0.0;   // attn_logit_softcapping (0 = none)
  /// x [B, T, hidden] -> [B, T, hidden]. Throws c10::Error when the layer's window does not match the context's
  /// (a model/context mix-up, not bad input).
  at::Tensor forward(const at::Tensor& x, const LayerContext& context);
};

class GemmaMlp : public torch::nn::Module {
 public:
  std::shared_ptr<LinearLike> gate_proj, up_proj, down_proj;
  /// down(gelu_tanh(gate(x)) * up(x)) (HF's hidden_activation gelu_pytorch_tanh).
  at::Tensor forward(const at::Tensor& x);
};

class GemmaDecoderLayer : public DecoderLayer {
 public:
  /// Loads layer `index` from `weights` as `dtype`; errors name the missing or mis-shaped tensor.
  static absl::StatusOr<std::shared_ptr<GemmaDecoderLayer>> Load(const checkpoint::ModelConfig& config, int64_t index,
                                                                 const WeightSource& weights, at::ScalarType dtype);
  at::Tensor forward(const at::Tensor& hidden, const LayerContext& context) override;

  std::shared_ptr<RmsNorm> input_layernorm, post_attention_layernorm, pre_feedforward_layernorm,
      post_feedforward_layernorm;
  std::shared_ptr<GemmaAttention> self_attn;
  std::shared_ptr<GemmaMlp> mlp;

 private:
  GemmaDecoderLayer(int64_t index, std::string prefix) : DecoderLayer(index, std::move(prefix)) {}
};

}  // namespace quark::runtime
