// DeepSeek-V3's multi-head latent attention (MLA) as HF's DeepseekV3Attention computes it, and its YaRN RoPE.
//   q = q_b_proj(q_a_layernorm(q_a_proj(x)))  (or q_proj(x))          [B, T, H, nope + rope]
//   kv_a = kv_a_proj_with_mqa(x) = [c_kv | k_rot]                      c_kv [B, T, kv_lora], k_rot [B, T, rope]
//   kv = kv_b_proj(kv_a_layernorm(c_kv)) = per head [k_nope | v]     [B, T, H, nope + v]
//   RoPE on q's rope part and the one shared k_rot (de-interleaved first when rope_interleave), then softmax
//   attention of [q_nope | q_rot] against [k_nope | k_rot] scaled by qk_head_dim^-0.5 * mscale^2 (YaRN's
//   mscale_all_dim), and o_proj over the heads' v.
#pragma once

#include <cstdint>
#include <memory>

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include "core/checkpoint/deepseek_config.h"
#include "core/runtime/attention.h"
#include "core/runtime/decoder_layer.h"
#include "core/runtime/yarn_rope.h"

namespace quark::runtime {

/// The inverse frequencies [qk_rope_head_dim / 2] (float64) and the cos/sin multiplier (YarnRopeFrequencies).
using DeepseekRope = RopeFrequencies;
DeepseekRope DeepseekRopeFrequencies(const checkpoint::DeepseekConfig& config);

/// cos and sin [T, qk_rope_head_dim] in `dtype` (computed in float64, times attention_factor).
void DeepseekRopeTables(const checkpoint::DeepseekConfig& config, int64_t seq_len, at::ScalarType dtype, at::Tensor* cos,
                        at::Tensor* sin);

/// The softmax scale: qk_head_dim^-0.5, times YarnMscale(factor, mscale_all_dim)^2 when rope_scaling gives
/// mscale_all_dim.
double DeepseekSoftmaxScale(const checkpoint::DeepseekConfig& config);

class DeepseekAttention : public torch::nn::Module {
 public:
  explicit DeepseekAttention(const checkpoint::DeepseekConfig& config);
  /// Linears (slots filled by the layer); q_a_proj / q_b_proj null without q_lora_rank, q_proj null with it.
  std::shared_ptr<LinearLike> q_proj, q_a_proj, q_b_proj, kv_a_proj_with_mqa, kv_b_proj, o_proj;
  std::shared_ptr<RmsNorm> q_a_layernorm, kv_a_layernorm;
  /// x [B, T, hidden] -> [B, T, hidden]; context.cos/sin are DeepseekRopeTables, context.mask the causal mask.
  at::Tensor forward(const at::Tensor& x, const LayerContext& context);

 private:
  int64_t heads_, nope_, rope_, v_dim_, kv_lora_;
  bool interleave_;
  double scale_;
};

}  // namespace quark::runtime
