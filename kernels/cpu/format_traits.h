// The traits table of every element format (house style: ggml's type traits): one row per format with its
// name, bits, range and scalar reference encode / decode / round functions. Fast paths are tested against the Refs.
#pragma once

#include <cstdint>
#include <string_view>

#include "kernels/element/grid_args.h"

namespace quark::kernels {

/// Element formats of the numerics (numerics.md, "Data types").
enum class ElemFormat : uint8_t {
  kInt8,
  kUInt8,
  kInt4,
  kUInt4,
  kInt3,
  kInt2,
  kFp8E4M3,
  kFp8E5M2,
  kFp6E3M2,
  kFp6E2M3,
  kFp4E2M1,
};
inline constexpr int kNumElemFormats = 11;

struct FormatTraits {
  ElemFormat format;
  std::string_view name;  // Quark's spelling ("int8", "fp8_e4m3", "fp4")
  int bits;               // storage bits of one element
  bool is_float;          // a small float format (else an integer grid)
  // Integer grids: [qmin, qmax].
  int qmin;
  int qmax;
  // Float formats: exponent / mantissa bits, bias 2^(ebits-1)-1, smallest normal exponent 1-bias,
  // largest exponent (emax, used by MX) and largest finite value.
  int ebits;
  int mbits;
  int bias;
  int emin;
  int emax;
  float max;
  bool has_inf;  // fp8_e5m2 only
  bool has_nan;  // fp8 formats only
  /// Scalar reference: float32 value -> nearest grid value (RNE, saturating at +-max, NaN/Inf pass through).
  float (*round_ref)(float x);
  /// Scalar reference: float32 value -> code (low `bits` bits). Integers: round half even and clamp.
  uint8_t (*encode_ref)(float x);
  /// Scalar reference: code -> float32 value.
  float (*decode_ref)(uint8_t code);
};

/// The row of one format. Every enum value has a row.
const FormatTraits& Traits(ElemFormat format);

/// What the shared element math (kernels/element) rounds a float format's grid with.
inline GridArgs GridArgsOf(const FormatTraits& t) { return GridArgs{t.mbits, t.emin, t.max}; }

/// All rows, for tests that loop over the table.
const FormatTraits* AllTraits();

}  // namespace quark::kernels
