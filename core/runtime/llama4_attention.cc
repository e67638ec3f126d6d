#include "core/runtime/llama4_attention.h"

#include <cmath>
#include <limits>

#include "core/runtime/attention.h"
#include "core/runtime/eager_powers.h"

namespace quark::runtime {
namespace {

at::ScalarType AtLeastFloat(const at::Tensor& x) { return at::promote_types(x.scalar_type(), at::kFloat); }

// HF's Llama4TextL2Norm: x * rsqrt(mean(x^2) + eps) over the last dimension in float32, cast back.
at::Tensor L2Norm(const at::Tensor& x, double eps) {
  const at::Tensor f = x.to(AtLeastFloat(x));
  return (f * at::rsqrt(Squared(f).mean(-1, /*keepdim=*/true) + eps)).to(x.scalar_type());
}

}  // namespace

at::Tensor ChunkedCausalMask(int64_t seq_len, int64_t chunk) {
  const at::Tensor pos = at::arange(seq_len, at::kLong);
  const at::Tensor i = pos.unsqueeze(1), j = pos.unsqueeze(0);
  const at::Tensor visible = (j <= i).logical_and(at::div(i, chunk, "floor") == at::div(j, chunk, "floor"));
  return at::zeros({seq_len, seq_len}, at::kFloat).masked_fill(visible.logical_not(), -std::numeric_limits<float>::infinity());
}

at::Tensor ApplyInterleavedRope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t t = x.size(1), d = x.size(3);
  const at::ScalarType precision = AtLeastFloat(x);
  const at::Tensor pairs = x.to(precision).reshape({x.size(0), t, x.size(2), d / 2, 2});
  const at::Tensor x0 = pairs.select(-1, 0), x1 = pairs.select(-1, 1);  // [B, T, H, D/2]
  const at::Tensor c = cos.to(precision).view({1, t, 1, d / 2}), s = sin.to(precision).view({1, t, 1, d / 2});
  return at::stack({x0 * c - x1 * s, x0 * s + x1 * c}, -1).flatten(3).to(x.scalar_type());
}

at::Tensor AttentionTemperature(int64_t seq_len, double floor_scale, double attn_scale) {
  const at::Tensor pos = at::arange(seq_len, at::kFloat);
  return at::log1p(at::floor((pos + 1.0) / floor_scale)) * attn_scale + 1.0;
}

Llama4Attention::Llama4Attention(const checkpoint::Llama4Config& config, int64_t layer)
    : heads_(config.base.num_attention_heads),
      kv_heads_(config.base.num_key_value_heads),
      head_dim_(config.base.head_dim),
      rope_(config.UsesRope(layer)),
      qk_norm_(config.use_qk_norm && config.UsesRope(layer)),
      temperature_(config.attn_temperature_tuning && !config.UsesRope(layer)),
      chunk_(config.chunked_layers[layer] ? config.attention_chunk_size : 0),
      eps_(config.base.rms_norm_eps),
      floor_scale_(config.floor_scale),
      attn_scale_(config.attn_scale) {}

at::Tensor Llama4Attention::forward(const at::Tensor& x, const LayerContext& context) {
  const int64_t batch = x.size(0), seq = x.size(1);
  at::Tensor q = q_proj->forward(x).view({batch, seq, heads_, head_dim_});  // [B, T, H, D]
  at::Tensor k = k_proj->forward(x).view({batch, seq, kv_heads_, head_dim_});
  const at::Tensor v = v_proj->forward(x).view({batch, seq, kv_heads_, head_dim_}).transpose(1, 2).contiguous();
  if (rope_) {
    const at::Tensor cos = context.cos.narrow(-1, 0, head_dim_ / 2), sin = context.sin.narrow(-1, 0, head_dim_ / 2);
    q = ApplyInterleavedRope(q, cos, sin);
    k = ApplyInterleavedRope(k, cos, sin);
  }
  if (qk_norm_) {
    q = L2Norm(q, eps_);
    k = L2Norm(k, eps_);
  }
  if (temperature_) {
    const at::Tensor scales = AttentionTemperature(seq, floor_scale_, attn_scale_).to(q.device()).view({1, seq, 1, 1});
    q = (q * scales).to(q.scalar_type());
  }
  const at::Tensor mask = chunk_ > 0 && chunk_ < seq ? ChunkedCausalMask(seq, chunk_).to(x.device()) : context.mask;
  const at::Tensor attended = CausalAttention(q.transpose(1, 2).contiguous(), k.transpose(1, 2).contiguous(), v, mask,
                                              1.0 / std::sqrt(static_cast<double>(head_dim_)));
  return o_proj->forward(attended);
}

}  // namespace quark::runtime
