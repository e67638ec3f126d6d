// OCP MX: blocks of 32 consecutive elements share one power-of-two scale stored as E8M0 (numerics.md, "MX shared
// scale per block"). Data is viewed as [rows, len] (contiguous, the block axis last); a row's last block may be
// shorter than 32 (a tail: treated as zero-padded for the scale, the padding never written).
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/cpu/format_traits.h"
#include "kernels/cpu/rounding.h"
#include "kernels/element/element_ops.h"

namespace quark::kernels {

inline constexpr int64_t kMxBlock = 32;

/// scale_calculation_mode of the shared exponent.
enum class MxScaleMode { kEven, kFloor, kCeil };

struct MxArgs {
  /// Element format: a float format, or kInt8 for MXINT8.
  ElemFormat element = ElemFormat::kFp4E2M1;
  MxScaleMode mode = MxScaleMode::kEven;
  /// MXINT8 only (float elements always round half to even onto their grid).
  RoundMode round = RoundMode::kHalfEven;
};

inline int64_t MxBlocksPerRow(int64_t len) { return (len + kMxBlock - 1) / kMxBlock; }

/// Shared scale exponent of a block with the given amax (in [-127, 127]; an all-zero block gives -126).
int MxSharedExponent(float amax, const MxArgs& args);

/// Scale exponents of every block: exps is [rows, MxBlocksPerRow(len)].
template <typename T>
void MxBlockExponents(const T* x, int64_t rows, int64_t len, const MxArgs& args, int8_t* exps);

/// Fake quantization; `exps` (as from MxBlockExponents) or nullptr to compute them on the fly. y may alias x.
/// Results keep their input's sign, zeros included (MXINT8 too: a negative element that rounds to zero gives -0).
template <typename T>
void MxFakeQuant(const T* x, T* y, int64_t rows, int64_t len, const MxArgs& args, const int8_t* exps);

/// Element codes (one per byte: float codes, or int8 two's complement for MXINT8) and E8M0 scales (exp + 127).
template <typename T>
void MxQuantize(const T* x, uint8_t* codes, uint8_t* e8m0, int64_t rows, int64_t len, const MxArgs& args);

/// y = decode(code) * 2^(e8m0 - 127) (MXINT8: code / 64 * scale; an int8 code has no -0, so a zero gives +0).
template <typename T>
void MxDequantize(const uint8_t* codes, const uint8_t* e8m0, T* y, int64_t rows, int64_t len, const MxArgs& args);

/// Scalar reference of one block's fake quantization (n <= 32 values, float32).
void MxFakeQuantBlockRef(const float* x, float* y, int n, const MxArgs& args);

/// Exact 2^k for k in [-149, 127] (subnormals included).
using element::Pow2;
/// 2^k is not a float for k > 127, yet an MXINT8 element x / 2^(e - 6) needs x * 2^(6 - e) with e down to -127:
/// such blocks (amax below 2^-121) are first multiplied by 2^kMxPrescaleExp, then by 2^(k - kMxPrescaleExp). With
/// exponents computed from the block's own amax both steps are exact (the values are tiny, so neither overflows,
/// and scaling up loses no bits); with given static exponents an element far above its block's scale may become
/// inf in the first step, and saturates exactly as the one-step product would.
using element::kMxPrescaleExp;
/// x * 2^k, exact, for k in [-149, 127 + kMxPrescaleExp].
using element::ScaleByPow2;

}  // namespace quark::kernels
