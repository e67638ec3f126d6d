// What the MX kernels share: one element's fake value and code given its block's shared exponent (element_ops.h
// math, in the order the CPU computes it), and the vectorized launch: each lane loads 16 bytes (kVecWidth<T>
// consecutive elements), 32 / kVecWidth<T> lanes make one MX block, and the block amax is a shuffle over them
// (kernels/element/launch_plan.h's MxVecLaneOf says which lane holds what).
#pragma once

#include "kernels/cuda/cuda_map.cuh"

namespace quark::kernels::cuda {

/// One MX element, fake quantized with its block's shared exponent e.
template <int kMode>
__device__ __forceinline__ float MxFakeElement(float v, int e, const CudaMxArgs& a) {
  const int shift = a.is_int ? 6 : 0;
  const float scaled = element::ScaleByPow2(v, shift - e);
  const float r = a.is_int ? element::MxIntValue<kMode>(scaled, 1.0f) : element::GridSat(scaled, a.grid);
  return r * element::Pow2(e - shift);
}

/// One MX element's code: MXINT8 two's complement (no NaN code: 0) or the float element's code.
template <int kMode>
__device__ __forceinline__ uint8_t MxCodeElement(float v, int e, const CudaMxArgs& a, const GridCodeArgs& gc) {
  const int shift = a.is_int ? 6 : 0;
  const float scaled = element::ScaleByPow2(v, shift - e);
  if (a.is_int) {
    const float q = element::Clamp(element::Round<kMode>(element::Clamp(scaled, -128.0f, 128.0f)), -127.0f, 127.0f);
    return static_cast<uint8_t>(static_cast<int8_t>(q != q ? 0 : static_cast<int>(q)));
  }
  return element::EncodeGridValue(element::GridSat(scaled, a.grid), gc);
}

/// Whether the vectorized MX launch applies: whole vectors per row and 16-byte aligned input; `out` aligned to one
/// lane's output (out_bytes per element).
template <typename T>
bool MxVectorizable(const CudaMxArgs& a, const void* x, const void* out, int64_t out_bytes) {
  constexpr int64_t kWidth = kVecWidth<T>;
  return a.len % kWidth == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(out) % static_cast<uintptr_t>(kWidth * out_bytes) == 0;
}

/// Vectorized MX: each warp takes kVecWidth<T> blocks per step; `store(lane, v, e)` writes the lane's elements
/// (v holds zeros where !lane.valid) given their block's shared exponent e.
template <typename T, typename Index, typename Store>
__global__ void MxVecKernel(const T* x, CudaMxArgs a, Index rows, Index len, Store store) {
  constexpr int kWidth = kVecWidth<T>;
  constexpr int kLanesPerBlock = 32 / kWidth;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const Index slots = element::MxVecSlots<Index>(rows, len, kWidth);
  const Index warps = static_cast<Index>(gridDim.x) * (blockDim.x / 32);
  // Whole warps step together (the slot is the same on all lanes), so every shuffle sees all 32 lanes.
  for (Index slot = (static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; slot < slots; slot += warps) {
    const element::MxVecLane<Index> l = element::MxVecLaneOf<Index>(slot, lane, rows, len, kWidth);
    float v[kWidth];
    if (l.valid) {
      LoadVec(x + l.index, v);
    } else {
#pragma unroll
      for (int k = 0; k < kWidth; ++k) v[k] = 0.0f;
    }
    float amax = 0.0f;
#pragma unroll
    for (int k = 0; k < kWidth; ++k) amax = fmaxf(amax, AmaxTerm(v[k]));
#pragma unroll
    for (int off = kLanesPerBlock / 2; off > 0; off >>= 1) {
      amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, off));
    }
    store(l, v, element::MxSharedExponent(amax, a.elem_mbits, a.emax, a.mode));
  }
}

/// Launches MxVecKernel over [a.rows, a.len] with 32-bit indices where the tensor allows.
template <typename T, typename MakeStore>
int LaunchMxVec(const T* x, const CudaMxArgs& a, void* stream, MakeStore make_store) {
  constexpr int64_t kWidth = kVecWidth<T>;
  const int64_t slots = element::MxVecSlots<int64_t>(a.rows, a.len, kWidth);
  if (slots == 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  if (element::Fits32(a.rows * a.len + 32 * kWidth)) {
    const auto store = make_store(uint32_t{});
    auto kernel = MxVecKernel<T, uint32_t, decltype(store)>;
    kernel<<<GridBlocksFor(kernel, slots * 32), kThreads, 0, s>>>(x, a, static_cast<uint32_t>(a.rows),
                                                                  static_cast<uint32_t>(a.len), store);
  } else {
    const auto store = make_store(int64_t{});
    auto kernel = MxVecKernel<T, int64_t, decltype(store)>;
    kernel<<<GridBlocksFor(kernel, slots * 32), kThreads, 0, s>>>(x, a, a.rows, a.len, store);
  }
  return LastLaunchError();
}

}  // namespace quark::kernels::cuda
