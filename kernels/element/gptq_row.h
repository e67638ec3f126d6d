// The sequential part of one GPTQ block for one output row, written once for the CPU and CUDA (like element_ops.h).
//
// Inside a block of GPTQ's column loop every column is rounded, its error divided by the inverse Hessian factor's
// diagonal and spread over the block's later columns, one column after the other. The tensor-op loop does that with
// about ten device operations a column (on an H200 each costs ~18 us of launch and sync, so the loop is launch
// bound: 0.8 s for a 4096-column layer). But rows never mix inside a block: row r's rounding, error and updates read
// only row r of the weight (and the shared factor U), so one thread per row can run the whole block in one launch.
// The float operations are exactly the tensor-op loop's, in its order: the column cast to the weight's dtype, the
// fake quantization (element_ops.h's AffineFake on an integer grid, GridSat on a float one, MxIntValue on MXINT8,
// W4A8's two stages), the result cast back, (w - q) / U[j][j], and each later column's w - e * U[j][t] with the
// product rounded first (no contraction on either target). So the fused block gives the tensor-op loop's bits on the
// same device (tests/algorithms/gptq_tensor_ops_test.cc on the CPU, gptq_cuda_test on a GPU); the lazy update after
// the block stays one GEMM.
#pragma once

#include <cstdint>

#include "kernels/element/element_ops.h"

#if defined(QUARK_LANE_NS)
namespace quark::kernels::QUARK_LANE_NS {
#else
namespace quark::kernels::element {
#endif

/// The grids a fused block rounds on.
enum GptqGrid : int {
  /// Integers with a scale and zero point: AffineFake.
  kGptqIntegerGrid = 0,
  /// A small float format (fp8 / fp6 / fp4) with a scale, and a global scale above it (NVFP4; 1 otherwise):
  /// ScaledGridFake. MX's float elements are this grid with the block's power-of-two scale.
  kGptqFloatGrid = 1,
  /// MXINT8: int8 elements under the block's power-of-two scale 2^(e - 6), rounded keeping the sign of zero:
  /// MxIntFake.
  kGptqMxIntGrid = 2,
  /// W4A8's two stages: the fp8 value of x under the per-tensor scale, then the integer code of that value with its
  /// channel's scale and zero point: W4A8Fake.
  kGptqW4A8Grid = 3,
};

/// One segment [begin, end) of a block of `count` columns that starts at column `block_begin` of the working weight.
/// Pointers are to the memory of the device that runs it. Parameters are a [rows, groups] table; column j of the
/// block (0 <= j < count) uses group column_group[j] (column_group null: group 0).
struct GptqBlockArgs {
  float* work = nullptr;  // [rows, ldw] float32: the working weight, updated in place
  int64_t ldw = 0;
  float* q = nullptr;  // [rows, ldq] float32: the rounded weight
  int64_t ldq = 0;
  float* err = nullptr;  // [rows, lde] float32: the block's scaled errors, column j at err[r * lde + j]
  int64_t lde = 0;
  const float* upper = nullptr;  // U [K, ldu] float32: the inverse Hessian's upper factor
  int64_t ldu = 0;
  const float* scale = nullptr;  // [rows, groups] float32
  const float* inv_scale = nullptr;  // 1.0f / scale in float32 (integer grid)
  const float* zero_point = nullptr;  // [rows, groups] float32 (integer grid)
  int64_t groups = 1;
  const int32_t* column_group = nullptr;  // [count] or null
  int64_t rows = 0;
  int64_t block_begin = 0;
  int64_t count = 0;
  int64_t begin = 0;
  int64_t end = 0;
  int grid = kGptqIntegerGrid;
  int qmin = -128;  // integer grid
  int qmax = 127;
  int round_mode = 0;  // integer, MXINT8 and W4A8 grids; RoundMode order: 0 half even, 1 half away from zero, 2 floor
  bool float_zero_point = false;  // integer grid
  GridArgs float_grid;  // float grid: the element format; W4A8: its first stage's (fp8 e4m3)
  float global_scale = 1.0f;  // float grid: NVFP4's float32 global scale (a dequant multiplier), else 1; W4A8: the
                              // fp8 stage's per-tensor scale
  int cast = 0;  // the weight's dtype, which each column is rounded in: 0 float32, 1 bfloat16, 2 float16
  // GPTAQ (core/algorithms/asymmetric_gptq.cc): P [K, ldp] float32, alpha * triu_1(dXX L) L^T; null for GPTQ.
  const float* asym = nullptr;
  int64_t ldp = 0;
};

/// A float grid's fake quantization of x with scale s under global scale g: the element value
/// GridSat(clamp(x / (s * g), -max, max)), dequantized as (value * s) * g. With g = 1 the products with g change no
/// bit, so it is ScaledGridValue(x, s) * s, what the fp8 / fp6 / fp4 kernels compute, and for s = 2^e MX's
/// GridSat(x * 2^-e) * 2^e (x / 2^e and x * 2^-e round the same exact value once, e in [-127, 127]; GridSat
/// saturates as the clamp does); with NVFP4's global scale it is Nvfp4Dequant(Nvfp4Value(x, s, g), s, g).
QUARK_HD float ScaledGridFake(float x, float s, float g, const GridArgs& grid) {
  return (GridSat(Clamp(x / (s * g), -grid.max, grid.max), grid) * s) * g;
}

/// MXINT8's fake quantization of x in a block with scale s = 2^e, the exponent read from s's bits as the MX
/// kernels' callers read it (MxScaleExponent): the element x / 2^(e - 6) (ScaleByPow2's two exact steps where
/// 2^(6 - e) is no float), rounded and clamped to [-127, 127] keeping the sign of zero (MxIntValue), times
/// 2^(e - 6). What the MX kernels compute (kernels/cpu/mx_kernels.cc, kernels/cuda/cuda_mx.cuh).
template <int kMode>
QUARK_HD float MxIntFake(float x, float s) {
  const int e = MxScaleExponent(s);
  return MxIntValue<kMode>(ScaleByPow2(x, 6 - e), 1.0f) * Pow2(e - 6);
}

/// W4A8's fake quantization of x, what its column-by-column rounding computes (core/numerics/progressive_quant.cc):
/// the fp8 first stage's value v = ScaledGridValue(x, g) (the e4m3 code of x / g, read back with a unit scale), the
/// second stage's real code of v (AffineRealCode with 1.0f / s, as the integer kernels quantize: NaN gives qmin),
/// dequantized as (code - z) * s, times g. The code is never -0 (x * inv + z and the rounding give +0), as the int8
/// the column loop stores it in cannot be.
template <int kMode>
QUARK_HD float W4A8Fake(float x, float s, float inv, float z, float qmin, float qmax, float g, const GridArgs& fp8) {
  const float v = ScaledGridValue(x, g, fp8);
  return ((AffineRealCode<kMode>(v, inv, z, qmin, qmax) - z) * s) * g;
}

/// float32 -> the weight's dtype -> float32 (what `.to(dtype).to(kFloat)` gives: round to nearest even).
template <int kCast>
QUARK_HD float CastRoundTrip(float v) {
  if (kCast == 1) return Bf16ToFloat(Bf16Bits(v));
  if (kCast == 2) return HalfToFloat(HalfBits(v));
  return v;
}

/// Row r of the segment. `w` holds row r's columns of the block (w[j] is column block_begin + j of the working
/// weight): the working weight itself on the CPU, a copy in fast memory on a GPU (written back by the caller).
template <int kGrid, int kMode, bool kFloatZp, int kCast>
QUARK_HD void GptqRow(const GptqBlockArgs& a, int64_t r, float* __restrict__ w) {
  float* __restrict__ q = a.q + r * a.ldq + a.block_begin;
  float* __restrict__ err = a.err + r * a.lde;
  const float* s = a.scale + r * a.groups;
  const float* inv = a.inv_scale + r * a.groups;
  const float* z = a.zero_point + r * a.groups;
  const float* u = a.upper + a.block_begin * a.ldu + a.block_begin;  // U[block_begin][block_begin]
  const float qmin = static_cast<float>(a.qmin), qmax = static_cast<float>(a.qmax);
  for (int64_t j = a.begin; j < a.end; ++j) {
    const int64_t g = a.column_group ? a.column_group[j] : 0;
    const float x = w[j];
    const float cast = CastRoundTrip<kCast>(x);
    float fake;
    if (kGrid == kGptqIntegerGrid) {
      fake = AffineFake<kMode, kFloatZp>(cast, s[g], inv[g], z[g], qmin, qmax);
    } else if (kGrid == kGptqFloatGrid) {
      fake = ScaledGridFake(cast, s[g], a.global_scale, a.float_grid);
    } else if (kGrid == kGptqMxIntGrid) {
      fake = MxIntFake<kMode>(cast, s[g]);
    } else {
      fake = W4A8Fake<kMode>(cast, s[g], inv[g], z[g], qmin, qmax, a.global_scale, a.float_grid);
    }
    const float rounded = CastRoundTrip<kCast>(fake);
    q[j] = rounded;
    const float* __restrict__ uj = u + j * a.ldu;
    const float e = (x - rounded) / uj[j];
    err[j] = e;
    if (a.asym == nullptr) {
      // Each later column of the block: w_t - e * U[j][t], the product rounded before the subtraction.
      for (int64_t t = j + 1; t < a.count; ++t) w[t] = w[t] - e * uj[t];
    } else {
      // GPTAQ's update row, this column included (its value feeds the lazy update's W1 P): w_t - (e * U[j][t] -
      // x * P[j][t]), each product rounded, then their difference, then the subtraction (Quark's two outer products
      // and their difference, then sub_).
      const float* __restrict__ pj = a.asym + (a.block_begin + j) * a.ldp + a.block_begin;
      for (int64_t t = j; t < a.count; ++t) w[t] = w[t] - (e * uj[t] - x * pj[t]);
    }
  }
}

template <int V>
struct IntConstant {
  static constexpr int value = V;
};
template <bool V>
struct BoolConstant {
  static constexpr bool value = V;
};

/// Calls f(grid, mode, float_zp, cast) as IntConstant / BoolConstant for the arguments' run-time choices (host code:
/// it picks the template instance that runs). A float grid has no rounding mode or zero point: one instance a cast;
/// MXINT8 and W4A8 have a rounding mode and no float zero point.
template <typename F>
void DispatchGptqRow(const GptqBlockArgs& a, F f) {
  auto by_cast = [&](auto grid, auto mode, auto fzp) {
    if (a.cast == 1) return f(grid, mode, fzp, IntConstant<1>{});
    if (a.cast == 2) return f(grid, mode, fzp, IntConstant<2>{});
    return f(grid, mode, fzp, IntConstant<0>{});
  };
  auto by_mode = [&](auto grid) {
    if (a.round_mode == 1) return by_cast(grid, IntConstant<1>{}, BoolConstant<false>{});
    if (a.round_mode == 2) return by_cast(grid, IntConstant<2>{}, BoolConstant<false>{});
    return by_cast(grid, IntConstant<0>{}, BoolConstant<false>{});
  };
  if (a.grid == kGptqFloatGrid) return by_cast(IntConstant<kGptqFloatGrid>{}, IntConstant<0>{}, BoolConstant<false>{});
  if (a.grid == kGptqMxIntGrid) return by_mode(IntConstant<kGptqMxIntGrid>{});
  if (a.grid == kGptqW4A8Grid) return by_mode(IntConstant<kGptqW4A8Grid>{});
  const auto integer = IntConstant<kGptqIntegerGrid>{};
  auto by_zp = [&](auto mode) {
    if (a.float_zero_point) return by_cast(integer, mode, BoolConstant<true>{});
    return by_cast(integer, mode, BoolConstant<false>{});
  };
  if (a.round_mode == 1) return by_zp(IntConstant<1>{});
  if (a.round_mode == 2) return by_zp(IntConstant<2>{});
  return by_zp(IntConstant<0>{});
}

}  // namespace quark::kernels::element (or QUARK_LANE_NS)
