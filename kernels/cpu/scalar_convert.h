// Bit-exact conversions between float32 and the element types the kernels read and write.
// Inline and branch-light so the loops that use them vectorize.
#pragma once

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cstdint>
#include <cstring>

namespace quark::kernels {

inline uint32_t BitsOf(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof(b));
  return b;
}

inline float FromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof(f));
  return f;
}

inline float ToF32(float v) { return v; }
inline float ToF32(c10::BFloat16 v) { return FromBits(static_cast<uint32_t>(v.x) << 16); }
inline float ToF32(c10::Half v) { return static_cast<float>(v); }

/// float32 -> T with round-to-nearest-even (what a LibTorch `.to(dtype)` does).
template <typename T>
T FromF32(float f);

template <>
inline float FromF32<float>(float f) {
  return f;
}

template <>
inline c10::BFloat16 FromF32<c10::BFloat16>(float f) {
  const uint32_t b = BitsOf(f);
  const uint32_t rounded = (b + 0x7FFFu + ((b >> 16) & 1u)) >> 16;
  // NaN keeps a quiet NaN (rounding could carry a NaN payload into Inf).
  const bool is_nan = (b & 0x7FFFFFFFu) > 0x7F800000u;
  return c10::BFloat16(static_cast<uint16_t>(is_nan ? 0x7FC0u : rounded), c10::BFloat16::from_bits());
}

template <>
inline c10::Half FromF32<c10::Half>(float f) {
  return c10::Half(f);
}

/// Rounds a float32 value to the nearest value of T and back (used for scale math in the input's dtype).
template <typename T>
inline float RoundTrip(float f) {
  return ToF32(FromF32<T>(f));
}

}  // namespace quark::kernels
