// Llama 4 text attention (HF's Llama4TextAttention, eager): grouped-query attention whose layers differ by
// no_rope_layers / layer_types (llama4_config.h):
//   RoPE layers: Meta's interleaved RoPE (dimension pairs (x0, x1), (x2, x3), ... rotated as complex numbers, in
//     float32), then, with use_qk_norm, an L2 norm (RMS without weight, eps = rms_norm_eps) of each head's q and k;
//   NoPE layers: no rotation; with attn_temperature_tuning q is scaled by log1p(floor((pos + 1) / floor_scale)) *
//     attn_scale + 1 (float32, per position);
//   chunked layers attend within their attention_chunk_size block (query i sees key j <= i with i / C == j / C), the
//   others causally over the whole sequence. Softmax scale head_dim^-0.5.
#pragma once

#include <cstdint>
#include <memory>

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include "core/checkpoint/llama4_config.h"
#include "core/runtime/decoder_layer.h"
#include "core/runtime/linear.h"

namespace quark::runtime {

/// [T, T] additive float32 mask of chunked causal attention: 0 where j <= i and i / chunk == j / chunk, else -inf.
at::Tensor ChunkedCausalMask(int64_t seq_len, int64_t chunk);

/// Meta's interleaved RoPE: x [B, T, H, D]; cos, sin [T, D / 2] (the angles of pair d at position t). Computed in
/// float32 (float64 when x is), returned in x's dtype: (x0 cos - x1 sin, x0 sin + x1 cos) for each pair.
at::Tensor ApplyInterleavedRope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

/// The temperature-tuning factors of positions 0..T-1 [T] (float32): log1p(floor((pos + 1) / floor_scale)) *
/// attn_scale + 1.
at::Tensor AttentionTemperature(int64_t seq_len, double floor_scale, double attn_scale);

class Llama4Attention : public torch::nn::Module {
 public:
  Llama4Attention(const checkpoint::Llama4Config& config, int64_t layer);
  std::shared_ptr<LinearLike> q_proj, k_proj, v_proj, o_proj;
  /// x [B, T, hidden] -> [B, T, hidden]. context.cos / sin are the model's rotate-half tables [T, head_dim]
  /// (RopeTables): their first half holds each pair's angle.
  at::Tensor forward(const at::Tensor& x, const LayerContext& context);

 private:
  int64_t heads_, kv_heads_, head_dim_;
  bool rope_, qk_norm_, temperature_;
  int64_t chunk_;  // 0 = full causal attention
  double eps_, floor_scale_, attn_scale_;
};

}  // namespace quark::runtime
