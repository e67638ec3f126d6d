// Shared pieces of the decoder layers: causal attention with grouped KV heads, RoPE, norms, masks.
#pragma once

#include <cstdint>

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include "core/checkpoint/forward_workspace.h"
#include "core/checkpoint/model_config.h"
#include "core/runtime/decoder_layer.h"

namespace quark::runtime {

/// Causal softmax attention. q [B, H, T, D], k and v [B, KV, T, D] with H a multiple of KV (query head h reads
/// KV head h / (H / KV), HF's repeat_kv); mask [T, T] additive float32, -inf wherever the key comes after the query
/// (CausalMask's, a window's, Llama 4's chunks': every mask here). Scores and softmax in float32.
/// Returns [B, T, H * D] in q's dtype. Works through blocks of KV heads and query rows
/// (checkpoint::ScoreBlockOf), each block scoring only the keys up to its last row, so the score matrix stays small
/// and the masked half of it is never computed.
/// bf16 on a CPU without native bf16 GEMMs (matmul_precision.h): both products in float32, the probabilities
/// kept in float32, the result rounded to bf16 once.
/// `softcap` > 0 (Gemma 2's attn_logit_softcapping): scores become softcap * tanh(scores / softcap) after the scale
/// and before the mask, as HF's Gemma2 eager_attention_forward.
at::Tensor CausalAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                           double scale, double softcap = 0);

/// CausalAttention in the blocks given rather than ScoreBlockOf's (tests try every shape of block on small inputs).
at::Tensor CausalAttentionInBlocks(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                                   double scale, double softcap, checkpoint::ScoreBlock block);

/// [T, T] additive float32 mask: query i sees key j (0) when j <= i and, with a window W > 0, also
/// i - W < j, so each query sees at most W keys including itself; -inf elsewhere. `window` 0 = no window.
/// This is HF transformers' convention (masking_utils.sliding_window_overlay: kv_idx > q_idx - sliding_window,
/// combined with the causal kv_idx <= q_idx), used by its Mistral and Qwen2 sliding-window layers. Older
/// transformers releases (_make_causal_mask) let a query see W + 1 keys; see huggingface/transformers#29176.
at::Tensor CausalMask(int64_t seq_len, int64_t window = 0);

/// HF's rotate-half RoPE tables for positions 0..T-1: cos and sin [T, head_dim] in `dtype`, computed in double,
/// with rope_theta and Llama 3 ("llama3") or "linear" rope_scaling applied to the inverse frequencies.
void RopeTables(const checkpoint::ModelConfig& config, int64_t seq_len, at::ScalarType dtype, at::Tensor* cos,
                at::Tensor* sin);

/// x [B, H, T, D] -> x * cos + rotate_half(x) * sin, cos/sin [T, D].
at::Tensor ApplyRope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

/// Llama's RMSNorm: x * rsqrt(mean(x^2) + eps) in float32, cast back, times weight. With `unit_offset` (Gemma's
/// Gemma2RMSNorm / Gemma3RMSNorm): x * rsqrt(mean(x^2) + eps) * (1 + weight), all in float32, cast back at the end;
/// weight() is then the stored w (HF's tensor), not 1 + w.
class RmsNorm : public torch::nn::Module {
 public:
  RmsNorm(at::Tensor weight, double eps, bool unit_offset = false)
      : weight_(std::move(weight)), eps_(eps), unit_offset_(unit_offset) {}
  at::Tensor forward(const at::Tensor& x);
  at::Tensor weight() const { return weight_; }
  /// Replaces the weight (same shape), e.g. after smoothing or folding into the next linears. The old one may be a
  /// read-only mmap view: algorithms replace it instead of editing it in place.
  void set_weight(at::Tensor weight) { weight_ = std::move(weight); }
  /// Divides the norm's output channels by s [hidden] (smoothing's fold): weight / s, or with a unit offset
  /// (1 + w) / s - 1, so that the effective multiplier is divided exactly either way.
  void DivideOutputs(const at::Tensor& s);
  bool unit_offset() const { return unit_offset_; }

 private:
  at::Tensor weight_;
  double eps_;
  bool unit_offset_ = false;
};

/// OPT's LayerNorm over the last dimension (weight/bias undefined when not elementwise-affine).
class LayerNorm : public torch::nn::Module {
 public:
  LayerNorm(at::Tensor weight, at::Tensor bias, double eps) : weight_(std::move(weight)), bias_(std::move(bias)), eps_(eps) {}
  at::Tensor forward(const at::Tensor& x);
  at::Tensor weight() const { return weight_; }
  at::Tensor bias() const { return bias_; }
  /// Replace rather than edit in place (see RmsNorm::set_weight).
  void set_weight(at::Tensor weight) { weight_ = std::move(weight); }
  void set_bias(at::Tensor bias) { bias_ = std::move(bias); }

 private:
  at::Tensor weight_;
  at::Tensor bias_;
  double eps_;
};

}  // namespace quark::runtime
