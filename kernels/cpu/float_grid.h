// Fast, branch-light rounding of float32 values onto a small float format's grid and encoding of grid values
// into codes. Works on the float32 bit pattern; the scalar Refs in format_traits.cc are the specification.
#pragma once

#include <cstdint>

#include "kernels/cpu/format_traits.h"
#include "kernels/cpu/scalar_convert.h"

namespace quark::kernels {

/// The constants one float format's fast paths need, copied out of its traits row.
struct GridConsts {
  int ebits = 0;
  int mbits = 0;
  int emin = 0;
  float max = 0.0f;
  uint8_t nan_code = 0;  // code written for NaN (fp8 formats; fp6/fp4 have none and write +0)
  bool has_nan = false;
};

inline GridConsts MakeGrid(const FormatTraits& t) {
  GridConsts g;
  g.ebits = t.ebits;
  g.mbits = t.mbits;
  g.emin = t.emin;
  g.max = t.max;
  g.has_nan = t.has_nan;
  g.nan_code = t.has_nan ? static_cast<uint8_t>(t.format == ElemFormat::kFp8E4M3 ? 0x7F : 0x7E) : 0;
  return g;
}

/// Nearest grid value (ties to even), saturating: |x| > max and +-Inf give +-max, NaN stays NaN.
inline float RoundToGridSaturate(float x, const GridConsts& g) {
  const uint32_t b = BitsOf(x);
  const uint32_t sign = b & 0x80000000u;
  const float a = FromBits(b & 0x7FFFFFFFu);
  const float c = a > g.max ? g.max : a;
  int32_t e = static_cast<int32_t>(BitsOf(c) >> 23) - 127;
  e = e < g.emin ? g.emin : e;
  // Adding 2^(e - mbits + 23) leaves exactly the format's mantissa bits; the FPU rounds half to even.
  // (A NaN makes a meaningless `m`, but NaN + m stays NaN.)
  const float m = FromBits(static_cast<uint32_t>(e - g.mbits + 23 + 127) << 23);
  const float r = (c + m) - m;
  return FromBits(BitsOf(r) | sign);
}

/// Nearest grid value with NaN and +-Inf passed through unchanged (numerics.md, "Data types").
inline float RoundToGrid(float x, const GridConsts& g) {
  const bool finite = (BitsOf(x) & 0x7F800000u) != 0x7F800000u;
  const float r = RoundToGridSaturate(x, g);
  return finite ? r : x;
}

/// Code of a value already on the grid (finite, |r| <= max) or NaN.
inline uint8_t EncodeGridValue(float r, const GridConsts& g) {
  const uint32_t b = BitsOf(r);
  const uint32_t sign = b >> 31;
  const uint32_t a = b & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return g.has_nan ? static_cast<uint8_t>(g.nan_code | (sign << 7)) : 0;
  const int32_t e = static_cast<int32_t>(a >> 23) - 127;
  uint32_t expf;
  uint32_t mant;
  if (e < g.emin) {
    expf = 0;
    mant = static_cast<uint32_t>(FromBits(a) * FromBits(static_cast<uint32_t>(g.mbits - g.emin + 127) << 23));
  } else {
    expf = static_cast<uint32_t>(e - g.emin + 1);
    mant = (a >> (23 - g.mbits)) & ((1u << g.mbits) - 1u);
  }
  return static_cast<uint8_t>((sign << (g.ebits + g.mbits)) | (expf << g.mbits) | mant);
}

/// 256-entry code -> float32 table of a float format (codes past 2^bits are unused).
const float* DecodeTable(ElemFormat format);

}  // namespace quark::kernels
