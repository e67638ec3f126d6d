#include "core/runtime/deepseek_attention.h"

#include <algorithm>
#include <cmath>

#include "core/runtime/yarn_rope.h"

namespace quark::runtime {
namespace {

// [..., d] pairs (x0, x1), (x2, x3), ... -> [x0, x2, ..., x1, x3, ...] (HF's apply_rotary_pos_emb_interleave).
at::Tensor Deinterleave(const at::Tensor& x) {
  auto sizes = x.sizes().vec();
  const int64_t d = sizes.back();
  sizes.back() = d / 2;
  sizes.push_back(2);
  return x.reshape(sizes).transpose(-1, -2).reshape(x.sizes());
}

}  // namespace

DeepseekRope DeepseekRopeFrequencies(const checkpoint::DeepseekConfig& config) {
  return YarnRopeFrequencies(config.yarn, config.qk_rope_head_dim, config.base.rope_theta);
}

void DeepseekRopeTables(const checkpoint::DeepseekConfig& config, int64_t seq_len, at::ScalarType dtype, at::Tensor* cos,
                        at::Tensor* sin) {
  YarnRopeTables(DeepseekRopeFrequencies(config), seq_len, dtype, cos, sin);
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
