// gpt-oss attention as HF's GptOssAttention with eager_attention_forward computes it: q/k/v/o with biases, grouped KV
// heads, rotate-half RoPE (YaRN tables), scores scaled by head_dim^-0.5 plus the causal (or sliding-window) mask,
// then a softmax over [scores | sink] where each head's learned sink logit joins every row and is dropped after
// the softmax (the row's weights sum to less than 1), times v.
#pragma once

#include <cstdint>
#include <memory>

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include "core/checkpoint/gpt_oss_config.h"
#include "core/runtime/decoder_layer.h"
#include "core/runtime/linear.h"

namespace quark::runtime {

/// Attention with per-head sinks. q [B, H, T, D], k and v [B, KV, T, D] (query head h reads KV head h / (H / KV)),
/// mask [T, T] additive float32, sinks [H]. Scores, softmax and the product in float32 (float64 when q is).
/// Returns [B, T, H * D] in q's dtype. One KV head's group at a time.
at::Tensor SinkAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                         const at::Tensor& sinks, double scale);

class GptOssAttention : public torch::nn::Module {
 public:
  /// `sinks` [heads]; `window` the layer's sliding window (0 = full attention).
  GptOssAttention(const checkpoint::GptOssConfig& config, at::Tensor sinks, int64_t window);
  /// Linears (slots filled by the layer).
  std::shared_ptr<LinearLike> q_proj, k_proj, v_proj, o_proj;
  /// x [B, T, hidden] -> [B, T, hidden]; context.cos/sin the YaRN tables, context.mask or (windowed layers)
  /// context.sliding_mask.
  at::Tensor forward(const at::Tensor& x, const LayerContext& context);
  const at::Tensor& sinks() const { return sinks_; }
  int64_t window() const { return window_; }

 private:
  int64_t heads_, kv_heads_, head_dim_, window_;
  double scale_;
  at::Tensor sinks_;
};

}  // namespace quark::runtime
