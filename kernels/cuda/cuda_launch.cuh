// What every CUDA kernel file shares: element loads and stores that round exactly as the CPU's conversions do, the
// grid size of a grid-stride launch, and the dispatch on the element type.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/quant_cuda.h"
#include "kernels/element/element_ops.h"

namespace quark::kernels::cuda {

// Element storage types: float32, and bfloat16 / half as their bits (the conversions are element_ops' own, so a
// NaN is written with the CPU's bits, not CUDA's intrinsics' ones).
struct Bf16 {
  uint16_t bits;
};
struct F16 {
  uint16_t bits;
};

__device__ __forceinline__ float Load(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float Load(const Bf16* p, int64_t i) { return element::Bf16ToFloat(p[i].bits); }
__device__ __forceinline__ float Load(const F16* p, int64_t i) { return element::HalfToFloat(p[i].bits); }
__device__ __forceinline__ void Store(float* p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void Store(Bf16* p, int64_t i, float v) { p[i].bits = element::Bf16Bits(v); }
__device__ __forceinline__ void Store(F16* p, int64_t i, float v) { p[i].bits = element::HalfBits(v); }

/// A float32 result as the CPU kernels write it: x86 carries an input NaN, quieted, through every operation, while
/// CUDA's arithmetic writes its canonical NaN 0x7FFFFFFF (found on the H200: every NaN element of a float32 output
/// differed). `in` is the element the result was computed from; a NaN made from numbers gets x86's default NaN.
/// The bfloat16 and half stores write c10's NaN already.
__device__ __forceinline__ float CpuNaNResult(float in, float out) {
  if (out == out) return out;
  if (in != in) return __uint_as_float(__float_as_uint(in) | 0x00400000u);
  return __uint_as_float(0xFFC00000u);
}
template <typename T>
__device__ __forceinline__ void StoreResult(T* p, int64_t i, float /*in*/, float out) {
  Store(p, i, out);
}
__device__ __forceinline__ void StoreResult(float* p, int64_t i, float in, float out) {
  p[i] = CpuNaNResult(in, out);
}

constexpr int kThreads = 256;

/// Streaming multiprocessors of the current device (asked once per device; 0 when unknown).
int DeviceSmCount();

/// Blocks of a grid-stride launch over n items with at most `cap` blocks (none where cap <= 0).
inline int GridBlocksCapped(int64_t n, int64_t cap) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  if (cap <= 0) cap = int64_t{65535} * 32;
  return static_cast<int>(b < cap ? (b < 1 ? 1 : b) : cap);
}

/// Blocks of a grid-stride launch over n items: one item per thread up to 16 blocks per SM, more items per thread
/// beyond that.
inline int GridBlocks(int64_t n) { return GridBlocksCapped(n, int64_t{16} * DeviceSmCount()); }

/// Blocks of a grid-stride launch of `kernel` over n items: at most one full wave (every SM holding as many blocks
/// of this kernel as its registers allow), so no SM idles through a last partial wave; more items per thread beyond.
template <typename Kernel>
int GridBlocksFor(Kernel kernel, int64_t n) {
  int per_sm = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    per_sm = 0;
  }
  return per_sm > 0 ? GridBlocksCapped(n, int64_t{per_sm} * DeviceSmCount()) : GridBlocks(n);
}

#define QUARK_GRID_STRIDE(i, n)                                                                       \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

/// Calls f(T{}) with T the storage type of `elem`; returns what f returns.
template <typename F>
int DispatchElem(CudaElem elem, F f) {
  switch (elem) {
    case CudaElem::kBF16:
      return f(Bf16{});
    case CudaElem::kF16:
      return f(F16{});
    case CudaElem::kF32:
      break;
  }
  return f(0.0f);
}

/// Calls f(std::integral_constant<int, mode>) for a RoundMode index (0, 1, 2).
template <typename F>
int DispatchRound(int mode, F f) {
  if (mode == 1) return f(std::integral_constant<int, 1>{});
  if (mode == 2) return f(std::integral_constant<int, 2>{});
  return f(std::integral_constant<int, 0>{});
}

/// |v| with NaN as 0: what an MX block's amax takes of each element (the CPU's block amax ignores NaN).
__device__ __forceinline__ float AmaxTerm(float v) {
  const float a = element::Float(element::Bits(v) & 0x7FFFFFFFu);
  return a != a ? 0.0f : a;
}

/// The amax of one MX block over a warp (one lane per element).
__device__ __forceinline__ float WarpAmax(float v) {
  float amax = AmaxTerm(v);
  for (int off = 16; off > 0; off >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, off));
  return amax;
}

/// Where one lane of the scalar MX launch (one warp per block of 32 along rows of `len`) stands.
struct MxLane {
  int64_t index;  // the element's offset in the data
  int lane;
  bool valid;  // inside the row (a tail block's last lanes are not)
};

/// Lane threadIdx.x % 32 of MX block `block` (row-major over [rows, ceil(len / 32)]).
__device__ __forceinline__ MxLane MxLaneOf(int64_t block, int64_t len) {
  const int64_t blocks_per_row = (len + 31) / 32;
  MxLane l;
  l.lane = threadIdx.x % 32;
  const int64_t col = (block % blocks_per_row) * 32 + l.lane;
  l.valid = col < len;
  l.index = (block / blocks_per_row) * len + col;
  return l;
}

/// A grid-stride loop of whole warps over `count` items (one per warp): every lane of a warp sees the same item, so
/// shuffles see all 32 lanes.
#define QUARK_WARP_STRIDE(w, count)                                                                  \
  for (int64_t w = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32; w < (count); \
       w += static_cast<int64_t>(gridDim.x) * (blockDim.x / 32))

inline int LastLaunchError() { return static_cast<int>(cudaGetLastError()); }

}  // namespace quark::kernels::cuda
