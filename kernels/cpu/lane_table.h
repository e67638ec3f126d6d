// Function table of the vectorized float32 inner loops (lane_ops.h), one per instruction set.
#pragma once

#include <cstdint>

namespace quark::kernels {

/// The grid constants of a small float format, as the lane loops need them.
struct GridArgs {
  int mbits = 0;
  int emin = 0;
  float max = 0.0f;
};

/// Every loop works in place on float32 values v[0..n). Rounding modes index 0 half_even, 1 half away, 2 floor.
struct LaneTable {
  // v = (clamp(round(v * inv) + z, qmin, qmax) - z) * s  ([mode][float zero point: round(v * inv + z)]).
  void (*affine_run[3][2])(float* v, int64_t n, float s, float inv, float z, float qmin, float qmax) = {};
  // The same with per-element parameters.
  void (*affine_cols[3][2])(float* v, int64_t n, const float* s, const float* inv, const float* z, float qmin,
                            float qmax) = {};
  // Element i uses parameter i / g (groups of g consecutive elements).
  void (*affine_groups[3][2])(float* v, int64_t n, int64_t g, const float* s, const float* inv, const float* z,
                              float qmin, float qmax) = {};
  // v = round_grid(clamp(v / s, -max, max)) * s.
  void (*float_run)(float* v, int64_t n, float s, const GridArgs& g) = nullptr;
  void (*float_cols)(float* v, int64_t n, const float* s, const GridArgs& g) = nullptr;
  void (*float_groups)(float* v, int64_t n, int64_t group, const float* s, const GridArgs& g) = nullptr;
  // MX elements: block b = i / 32 uses inv[b] = 2^-e, s[b] = 2^e.
  void (*mx_grid)(float* v, int64_t n, const float* inv, const float* s, const GridArgs& g) = nullptr;
  void (*mx_int[3])(float* v, int64_t n, const float* inv, const float* s) = {};
  void (*block_amax)(const float* v, int64_t n, float* amax) = nullptr;
  void (*load_bf16)(const uint16_t* x, float* v, int64_t n) = nullptr;
  void (*store_bf16)(const float* v, uint16_t* y, int64_t n) = nullptr;
  void (*load_f16)(const uint16_t* x, float* v, int64_t n) = nullptr;
  void (*store_f16)(const float* v, uint16_t* y, int64_t n) = nullptr;
};

/// The baseline table (any CPU).
const LaneTable& BaseLaneTable();
/// The AVX2 / FMA / F16C table, or nullptr where it was not compiled.
const LaneTable* Avx2LaneTable();
/// The best table this CPU runs (QUARK_CPU_BASELINE=1 in the environment forces the baseline one).
const LaneTable& LaneOpsForThisCpu();

}  // namespace quark::kernels
