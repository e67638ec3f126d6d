// Integer rounding of float32 values without libm calls, so loops vectorize on SSE2/AVX2.
// Valid for |v| <= 2^22; callers clamp to the integer range (plus one) before rounding.
#pragma once

namespace quark::kernels {

/// The three `round_method`s of a QuantSpec.
enum class RoundMode { kHalfEven, kHalfAway, kFloor };

// Adding 1.5 * 2^23 pushes the fraction out of the mantissa; the FPU rounds half to even.
inline float RoundHalfEvenSmall(float v) {
  constexpr float kMagic = 12582912.0f;
  return (v + kMagic) - kMagic;
}

inline float RoundSmall(float v, RoundMode mode) {
  const float r = RoundHalfEvenSmall(v);
  if (mode == RoundMode::kHalfEven) return r;
  if (mode == RoundMode::kFloor) return r > v ? r - 1.0f : r;
  // Half away from zero: only exact ties differ from half-even (v - r is exact here).
  const float d = v - r;
  if (d == 0.5f || d == -0.5f) return v > 0.0f ? v + 0.5f : v - 0.5f;
  return r;
}

/// Clamps with NaN propagation (a NaN input stays NaN), unlike std::clamp on some paths.
inline float ClampKeepNan(float v, float lo, float hi) {
  const float a = v < lo ? lo : v;
  return a > hi ? hi : a;
}

}  // namespace quark::kernels
