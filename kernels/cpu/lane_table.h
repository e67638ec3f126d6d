// Function table of the vectorized float32 inner loops (lane_ops.h), one per instruction set.
#pragma once

#include <cstdint>

#include "kernels/element/grid_args.h"

namespace quark::kernels {


/// The same loops reading and writing bfloat16 bits directly (x may equal y): the conversions happen in registers,
/// one pass over the data instead of convert-in, quantize, convert-out through a float32 buffer.
struct Bf16LaneTable {
  void (*affine_run[3][2])(const uint16_t* x, uint16_t* y, int64_t n, float s, float inv, float z, float qmin,
                           float qmax) = {};
  void (*affine_groups[3][2])(const uint16_t* x, uint16_t* y, int64_t n, int64_t g, const float* s, const float* inv,
                              const float* z, float qmin, float qmax) = {};
  void (*float_run)(const uint16_t* x, uint16_t* y, int64_t n, float s, const GridArgs& g) = nullptr;
  void (*float_groups)(const uint16_t* x, uint16_t* y, int64_t n, int64_t group, const float* s,
                       const GridArgs& g) = nullptr;
  void (*mx_grid)(const uint16_t* x, uint16_t* y, int64_t n, const float* inv, const float* s,
                  const GridArgs& g) = nullptr;
  void (*mx_int[3])(const uint16_t* x, uint16_t* y, int64_t n, const float* inv, const float* s) = {};
  void (*block_amax)(const uint16_t* x, int64_t n, float* amax) = nullptr;
};

/// The quantization loops work in place on float32 values v[0..n); the conversions and copies go between buffers.
/// Rounding modes index 0 half_even, 1 half away, 2 floor.
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
  // Plain float32 copy in vector registers: an inlined memcpy of a chunk becomes `rep movs`, which is slow on CPUs
  // without fast short rep-mov support.
  void (*copy_f32)(const float* x, float* v, int64_t n) = nullptr;
  // Copy with non-temporal stores (then a store fence): for outputs far larger than the caches, so that writing
  // them does not first read every destination line into the cache.
  void (*stream_copy)(const void* src, void* dst, int64_t bytes) = nullptr;
  void (*load_bf16)(const uint16_t* x, float* v, int64_t n) = nullptr;
  void (*store_bf16)(const float* v, uint16_t* y, int64_t n) = nullptr;
  void (*load_f16)(const uint16_t* x, float* v, int64_t n) = nullptr;
  void (*store_f16)(const float* v, uint16_t* y, int64_t n) = nullptr;
  // The 8 x 8 block whose row k starts at src[k], transposed into the block whose row k starts at dst[k]
  // (dst[k][j] = src[j][k]), as bits. With only_changed, a destination block that already holds those bits is not
  // written (no cache line dirtied).
  void (*transpose8x8)(const float* const* src, float* const* dst, bool only_changed) = nullptr;
  Bf16LaneTable bf16;
};

/// The table of the loops, plus whether a kernel's output is large enough to be written with non-temporal stores.
struct LaneIo {
  const LaneTable* table = nullptr;
  bool stream = false;
  const LaneTable& t() const { return *table; }
};

/// float32 outputs of at least this many bytes are streamed: they cannot stay in the caches anyway (a 4096 x 4096
/// float32 weight is 64 MiB), and non-temporal stores save the read of each destination line before it is written.
/// 16-bit outputs are not: the fused bfloat16 loops write straight to the tensor, and routing them through a buffer
/// to stream it cost more than it saved (numerics_bench on a 2-core AVX2 machine: bf16 int8 per-channel 6.3-6.7
/// GB/s written directly, 3.5-5.5 GB/s streamed; float32 int8 per-channel 9.2-9.4 streamed, 6.7-8.8 not).
inline constexpr int64_t kStreamOutputBytes = int64_t{16} << 20;

/// The baseline table (any CPU).
const LaneTable& BaseLaneTable();
/// The AVX2 / FMA / F16C table, or nullptr where it was not compiled.
const LaneTable* Avx2LaneTable();
/// The best table this CPU runs (QUARK_CPU_BASELINE=1 in the environment forces the baseline one).
const LaneTable& LaneOpsForThisCpu();
/// LaneOpsForThisCpu() with streaming chosen for an output of `numel` elements of `element_size` bytes.
LaneIo LaneIoFor(int64_t numel, int64_t element_size);

}  // namespace quark::kernels
