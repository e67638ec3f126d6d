#include "core/runtime/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/checkpoint/forward_workspace.h"
#include "core/runtime/eager_powers.h"
#include "core/runtime/matmul_precision.h"

namespace quark::runtime {
namespace {

std::vector<double> InverseFrequencies(const checkpoint::ModelConfig& config) {
  const int64_t dim = config.head_dim;
  std::vector<double> inv(dim / 2);
  for (int64_t i = 0; i < dim / 2; ++i) inv[i] = 1.0 / std::pow(config.rope_theta, static_cast<double>(2 * i) / dim);
  if (!config.rope_scaling) return inv;
  const checkpoint::RopeScaling& s = *config.rope_scaling;
  if (s.rope_type == "linear") {
    for (double& f : inv) f /= s.factor;
    return inv;
  }
  // Llama 3: long wavelengths slowed by `factor`, short ones kept, a smooth blend in between.
  const double old_len = static_cast<double>(s.original_max_position_embeddings);
  const double low_wavelen = old_len / s.low_freq_factor;
  const double high_wavelen = old_len / s.high_freq_factor;
  for (double& f : inv) {
    const double wavelen = 2 * M_PI / f;
    if (wavelen < high_wavelen) continue;
    if (wavelen > low_wavelen || s.high_freq_factor == s.low_freq_factor) {  // equal factors: no blended band
      f /= s.factor;
      continue;
    }
    const double smooth = (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
    f = (1 - smooth) * f / s.factor + smooth * f;
  }
  return inv;
}

}  // namespace

at::Tensor CausalAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                           double scale, double softcap) {
  // The device budget counts one such block (checkpoint/forward_workspace.h).
  return CausalAttentionInBlocks(q, k, v, mask, scale, softcap,
                                 checkpoint::ScoreBlockOf(q.size(0), q.size(1), k.size(1), q.size(2)));
}

at::Tensor CausalAttentionInBlocks(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                                   double scale, double softcap, checkpoint::ScoreBlock block) {
  const int64_t batch = q.size(0), heads = q.size(1), seq = q.size(2), dim = q.size(3);
  const int64_t kv_heads = k.size(1), rep = heads / kv_heads;
  if (seq == 0) return at::empty({batch, 0, heads * dim}, q.options());
  block.kv_heads = std::clamp<int64_t>(block.kv_heads, 1, kv_heads);
  block.rows = std::clamp<int64_t>(block.rows, 1, seq);
  // Products in float32 where bf16 GEMMs are slow; q, k, v are small next to the weights, so widening them
  // whole costs little.
  const at::ScalarType compute = MatmulInFloat32(q) ? at::kFloat : q.scalar_type();
  // [B, KV, rep, T, D]: the query heads sharing a KV head side by side, so no KV copy is needed.
  const at::Tensor grouped_q = q.to(compute).reshape({batch, kv_heads, rep, seq, dim});
  const at::Tensor kw = k.to(compute), vw = v.to(compute);
  // A block of rows [r0, r1) reads keys [0, r1) only: the mask hides every later key, so the block skips their
  // products (about half of the work at long sequences) and its scores stay small.
  std::vector<at::Tensor> outputs;
  for (int64_t start = 0; start < kv_heads; start += block.kv_heads) {
    const int64_t n = std::min(block.kv_heads, kv_heads - start);
    std::vector<at::Tensor> row_blocks;
    for (int64_t r0 = 0; r0 < seq; r0 += block.rows) {
      const int64_t rows = std::min(block.rows, seq - r0), keys = r0 + rows;
      const at::Tensor qc = grouped_q.narrow(1, start, n).narrow(3, r0, rows).reshape({batch, n, rep * rows, dim});
      const at::Tensor kc = kw.narrow(1, start, n).narrow(2, 0, keys);
      const at::Tensor vc = vw.narrow(1, start, n).narrow(2, 0, keys);
      at::Tensor scores = at::matmul(qc, kc.transpose(-1, -2)).to(at::kFloat).mul_(scale);  // [B, n, rep*rows, keys]
      if (softcap > 0) scores = scores.div_(softcap).tanh_().mul_(softcap);
      scores = scores.view({batch, n, rep, rows, keys}).add_(mask.narrow(0, r0, rows).narrow(1, 0, keys));
      at::Tensor probs = at::softmax(scores, -1).to(compute).view({batch, n, rep * rows, keys});
      row_blocks.push_back(at::matmul(probs, vc).view({batch, n, rep, rows, dim}));
    }
    outputs.push_back(row_blocks.size() == 1 ? row_blocks[0] : at::cat(row_blocks, 3));
  }
  at::Tensor out = outputs.size() == 1 ? outputs[0] : at::cat(outputs, 1);  // [B, KV, rep, T, D]
  return out.view({batch, heads, seq, dim}).transpose(1, 2).reshape({batch, seq, heads * dim}).to(q.scalar_type());
}

at::Tensor CausalMask(int64_t seq_len, int64_t window) {
  const float inf = std::numeric_limits<float>::infinity();
  at::Tensor mask = at::full({seq_len, seq_len}, -inf, at::kFloat).triu(1);  // j > i
  if (window > 0 && window < seq_len) {
    mask.add_(at::full({seq_len, seq_len}, -inf, at::kFloat).tril(-window));  // j <= i - window
  }
  return mask;
}

void RopeTables(const checkpoint::ModelConfig& config, int64_t seq_len, at::ScalarType dtype, at::Tensor* cos,
                at::Tensor* sin) {
  const std::vector<double> inv = InverseFrequencies(config);
  const at::Tensor inv_freq = at::tensor(inv, at::kDouble);
  const at::Tensor positions = at::arange(seq_len, at::kDouble);
  const at::Tensor freqs = at::outer(positions, inv_freq);  // [T, D/2]
  const at::Tensor angles = at::cat({freqs, freqs}, -1);    // [T, D]
  *cos = angles.cos().to(dtype);
  *sin = angles.sin().to(dtype);
}

at::Tensor ApplyRope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  const at::Tensor rotated = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * cos + rotated * sin;
}

at::Tensor RmsNorm::forward(const at::Tensor& x) {
  const at::Tensor xf = x.to(at::kFloat);
  const at::Tensor normed = xf * at::rsqrt(Squared(xf).mean(-1, /*keepdim=*/true) + eps_);
  if (unit_offset_) return (normed * (weight_.to(at::kFloat) + 1.0)).to(x.scalar_type());
  return weight_.to(x.scalar_type()) * normed.to(x.scalar_type());
}

void RmsNorm::DivideOutputs(const at::Tensor& s) {
  if (!unit_offset_) {
    weight_ = weight_ / s.to(weight_.scalar_type());
    return;
  }
  // In float64 so that w' = (1 + w) / s - 1 loses nothing beyond the final rounding to the stored dtype.
  const at::Tensor w = weight_.to(at::kDouble);
  weight_ = ((w + 1.0) / s.to(at::kDouble) - 1.0).to(weight_.scalar_type());
}

at::Tensor LayerNorm::forward(const at::Tensor& x) {
  const at::Tensor w = weight_.defined() ? weight_.to(x.scalar_type()) : weight_;
  const at::Tensor b = bias_.defined() ? bias_.to(x.scalar_type()) : bias_;
  return at::layer_norm(x, {x.size(-1)}, w, b, eps_);
}

}  // namespace quark::runtime
