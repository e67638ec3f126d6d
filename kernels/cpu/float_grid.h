// Fast, branch-light rounding of float32 values onto a small float format's grid and encoding of grid values
// into codes. Works on the float32 bit pattern; the scalar Refs in format_traits.cc are the specification.
#pragma once

#include <cstdint>

#include "kernels/cpu/format_traits.h"
#include "kernels/cpu/scalar_convert.h"
#include "kernels/element/element_ops.h"

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
inline float RoundToGridSaturate(float x, const GridConsts& g) { return element::GridSat(x, GridArgs{g.mbits, g.emin, g.max}); }

/// Nearest grid value with NaN and +-Inf passed through unchanged (numerics.md, "Data types").
inline float RoundToGrid(float x, const GridConsts& g) {
  const bool finite = (BitsOf(x) & 0x7F800000u) != 0x7F800000u;
  const float r = RoundToGridSaturate(x, g);
  return finite ? r : x;
}

/// Code of a value already on the grid (finite, |r| <= max) or NaN.
inline uint8_t EncodeGridValue(float r, const GridConsts& g) {
  return element::EncodeGridValue(r, GridCodeArgs{g.ebits, g.mbits, g.emin, g.has_nan, g.nan_code});
}

/// 256-entry code -> float32 table of a float format (codes past 2^bits are unused).
const float* DecodeTable(ElemFormat format);

}  // namespace quark::kernels
