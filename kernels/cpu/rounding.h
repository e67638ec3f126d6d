// Integer rounding of float32 values without libm calls, so loops vectorize on SSE2/AVX2.
// Valid for |v| <= 2^22; callers clamp to the integer range (plus one) before rounding.
#pragma once

#include "kernels/element/element_ops.h"

namespace quark::kernels {

/// The three `round_method`s of a QuantSpec.
enum class RoundMode { kHalfEven, kHalfAway, kFloor };

// The formulas live in kernels/element/element_ops.h, shared with the lane loops and the CUDA kernels.
inline float RoundHalfEvenSmall(float v) { return element::Rne(v); }

inline float RoundSmall(float v, RoundMode mode) {
  if (mode == RoundMode::kHalfEven) return element::Round<0>(v);
  if (mode == RoundMode::kFloor) return element::Round<2>(v);
  return element::Round<1>(v);
}

/// Clamps with NaN propagation (a NaN input stays NaN), unlike std::clamp on some paths.
inline float ClampKeepNan(float v, float lo, float hi) { return element::Clamp(v, lo, hi); }

}  // namespace quark::kernels
