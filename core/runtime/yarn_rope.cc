#include "core/runtime/yarn_rope.h"

#include <algorithm>
#include <cmath>

namespace quark::runtime {
namespace {

// HF's find_correction_dim: the dimension whose wavelength makes `rotations` turns over the original context.
double CorrectionDim(double rotations, double dim, double base, double max_positions) {
  return dim * std::log(max_positions / (rotations * 2 * M_PI)) / (2 * std::log(base));
}

}  // namespace

double YarnMscale(double scale, double mscale) { return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

RopeFrequencies YarnRopeFrequencies(const std::optional<checkpoint::YarnScaling>& yarn, int64_t dim, double theta) {
  const double base = theta;
  at::Tensor exponents = at::arange(0, dim, 2, at::kDouble) / static_cast<double>(dim);
  const at::Tensor pos_freqs = at::pow(base, exponents);  // [dim / 2]
  RopeFrequencies rope;
  if (!yarn) {
    rope.inv_freq = 1.0 / pos_freqs;
    return rope;
  }
  const checkpoint::YarnScaling& y = *yarn;
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

void YarnRopeTables(const RopeFrequencies& rope, int64_t seq_len, at::ScalarType dtype, at::Tensor* cos, at::Tensor* sin) {
  const at::Tensor freqs = at::outer(at::arange(seq_len, at::kDouble), rope.inv_freq);  // [T, D/2]
  const at::Tensor angles = at::cat({freqs, freqs}, -1);                                // [T, D]
  *cos = (angles.cos() * rope.attention_factor).to(dtype);
  *sin = (angles.sin() * rope.attention_factor).to(dtype);
}

}  // namespace quark::runtime
