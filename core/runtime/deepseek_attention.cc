#include "core/runtime/deepseek_attention.h"

#include <algorithm>
#include <cmath>

namespace quark::runtime {
namespace {

// HF's find_correction_dim: the dimension whose wavelength makes `rotations` turns over the original context.
double CorrectionDim(double rotations, double dim, double base, double max_positions) {
  return dim * std::log(max_positions / (rotations * 2 * M_PI)) / (2 * std::log(base));
}

// [..., d] pairs (x0, x1), (x2, x3), ... -> [x0, x2, ..., x1, x3, ...] (HF's apply_rotary_pos_emb_interleave).
at::Tensor Deinterleave(const at::Tensor& x) {
  auto sizes = x.sizes().vec();
  const int64_t d = sizes.back();
  sizes.back() = d / 2;
  sizes.push_back(2);
  return x.reshape(sizes).transpose(-1, -2).reshape(x.sizes());
}

}  // namespace

double YarnMscale(double scale, double mscale) { return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

DeepseekRope DeepseekRopeFrequencies(const checkpoint::DeepseekConfig& config) {
  const int64_t dim = config.qk_rope_head_dim;
  const double base = config.base.rope_theta;
  at::Tensor exponents = at::arange(0, dim, 2, at::kDouble) / static_cast<double>(dim);
  const at::Tensor pos_freqs = at::pow(base, exponents);  // [dim / 2]
  DeepseekRope rope;
  if (!config.yarn) {
    rope.inv_freq = 1.0 / pos_freqs;
    return rope;
  }
  const checkpoint::YarnScaling& y = *config.yarn;
  const double factor = y.factor;
  if (y.attention_factor > 0) {
    rope.attention_factor = y.attention_factor;
  } else if (y.mscale > 0 && y.mscale_all_dim > 0) {
    rope.attention_factor = YarnMscale(factor, y.mscale) / YarnMscale(factor, y.mscale_all_dim);
  } else {
    rope.attention_factor = YarnMscale(factor, 1.0);
  }
  const double original = static_cast<double>(y.original_max_position_embeddings);
  double low = CorrectionDim(y.beta_fast, dim, base, original);
  double high = CorrectionDim(y.beta_slow, dim, base, original);
  if (y.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;
  const at::Tensor ramp = ((at::arange(dim / 2, at::kDouble) - low) / (high - low)).clamp(0, 1);
  const at::Tensor extrapolation = 1 - ramp;  // 1: keep the original frequency, 0: interpolate by the factor
  rope.inv_freq = (1.0 / (factor * pos_freqs)) * (1 - extrapolation) + (1.0 / pos_freqs) * extrapolation;
  return rope;
}

void DeepseekRopeTables(const checkpoint::DeepseekConfig& config, int64_t seq_len, at::ScalarType dtype, at::Tensor* cos,
                        at::Tensor* sin) {
  const DeepseekRope rope = DeepseekRopeFrequencies(config);
  const at::Tensor freqs = at::outer(at::arange(seq_len, at::kDouble), rope.inv_freq);  // [T, D/2]
  const at::Tensor angles = at::cat({freqs, freqs}, -1);                                // [T, D]
  *cos = (angles.cos() * rope.attention_factor).to(dtype);
  *sin = (angles.sin() * rope.attention_factor).to(dtype);
}

double DeepseekSoftmaxScale(const checkpoint::DeepseekConfig& config) {
  double scale = 1.0 / std::sqrt(static_cast<double>(config.qk_head_dim()));
  if (config.yarn && config.yarn->mscale_all_dim > 0) {
    const double m = YarnMscale(config.yarn->factor, config.yarn->mscale_all_dim);
    scale *= m * m;
  }
  return scale;
}

DeepseekAttention::DeepseekAttention(const checkpoint::DeepseekConfig& config)
    : heads_(config.base.num_attention_heads),
      nope_(config.qk_nope_head_dim),
      rope_(config.qk_rope_head_dim),
      v_dim_(config.v_head_dim),
      kv_lora_(config.kv_lora_rank),
      interleave_(config.rope_interleave),
      scale_(DeepseekSoftmaxScale(config)) {}

at::Tensor DeepseekAttention::forward(const at::Tensor& x, const LayerContext& context) {
  const int64_t batch = x.size(0), seq = x.size(1);
  // The two linears that read x first (a capture pass for input_layernorm's consumers stops after them).
  const at::Tensor q_low = q_a_proj ? q_a_proj->forward(x) : at::Tensor();
  const at::Tensor kv_a = kv_a_proj_with_mqa->forward(x);  // [B, T, kv_lora + rope]
  const at::Tensor q_all = q_a_proj ? q_b_proj->forward(q_a_layernorm->forward(q_low)) : q_proj->forward(x);
  const at::Tensor q = q_all.view({batch, seq, heads_, nope_ + rope_}).transpose(1, 2);  // [B, H, T, nope + rope]
  const at::Tensor kv = kv_b_proj->forward(kv_a_layernorm->forward(kv_a.narrow(-1, 0, kv_lora_)))
                            .view({batch, seq, heads_, nope_ + v_dim_})
                            .transpose(1, 2);  // [B, H, T, nope + v]
  at::Tensor q_rot = q.narrow(-1, nope_, rope_);
  at::Tensor k_rot = kv_a.narrow(-1, kv_lora_, rope_).view({batch, 1, seq, rope_});
  if (interleave_) {
    q_rot = Deinterleave(q_rot);
    k_rot = Deinterleave(k_rot);
  }
  q_rot = ApplyRope(q_rot, context.cos, context.sin);
  k_rot = ApplyRope(k_rot, context.cos, context.sin).expand({batch, heads_, seq, rope_});
  at::Tensor query = at::cat({q.narrow(-1, 0, nope_), q_rot}, -1);
  at::Tensor key = at::cat({kv.narrow(-1, 0, nope_), k_rot}, -1);
  at::Tensor value = kv.narrow(-1, nope_, v_dim_);
  // CausalAttention takes one head size: zero columns widen the narrower side without changing scores or values.
  const int64_t qk = nope_ + rope_, width = std::max(qk, v_dim_);
  if (v_dim_ < width) value = at::constant_pad_nd(value, {0, width - v_dim_});
  if (qk < width) {
    query = at::constant_pad_nd(query, {0, width - qk});
    key = at::constant_pad_nd(key, {0, width - qk});
  }
  const at::Tensor out = CausalAttention(query, key, value, context.mask, scale_)  // [B, T, H * width]
                             .view({batch, seq, heads_, width})
                             .narrow(-1, 0, v_dim_)
                             .reshape({batch, seq, heads_ * v_dim_});
  return o_proj->forward(out);
}

}  // namespace quark::runtime
