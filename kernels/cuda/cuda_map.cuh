// The element-wise launch every per-element kernel shares: 16-byte vector loads and stores of consecutive elements
// (kernels/element/launch_plan.h's VecPlan: a scalar head and tail around aligned vectors), the channel of each
// element stepped by a ChannelCursor instead of divided, 32-bit indices where the tensor allows. The per-element
// function (`Op`) is the same element_ops.h call the scalar kernel made, so every result keeps its bits.
#pragma once

#include "kernels/cuda/cuda_launch.cuh"
#include "kernels/element/launch_plan.h"

namespace quark::kernels::cuda {

/// Elements of T in one 16-byte vector.
template <typename T>
constexpr int kVecWidth = 16 / static_cast<int>(sizeof(T));

/// The bits a result is stored with: the CPU's NaN for float32 (CpuNaNResult), c10's conversions otherwise.
__device__ __forceinline__ uint32_t ResultBits(float*, float in, float out) {
  return __float_as_uint(CpuNaNResult(in, out));
}
__device__ __forceinline__ uint32_t ResultBits(Bf16*, float, float out) { return element::Bf16Bits(out); }
__device__ __forceinline__ uint32_t ResultBits(F16*, float, float out) { return element::HalfBits(out); }

__device__ __forceinline__ float FromBits(const float*, uint32_t b) { return __uint_as_float(b); }
__device__ __forceinline__ float FromBits(const Bf16*, uint32_t b) { return element::Bf16ToFloat(static_cast<uint16_t>(b)); }
__device__ __forceinline__ float FromBits(const F16*, uint32_t b) { return element::HalfToFloat(static_cast<uint16_t>(b)); }

/// One aligned 16-byte vector of T as kVecWidth<T> floats.
template <typename T>
__device__ __forceinline__ void LoadVec(const T* p, float (&v)[kVecWidth<T>]) {
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int k = 0; k < kVecWidth<T>; ++k) v[k] = FromBits(p, element::WordElement<sizeof(T)>(w, k));
}

/// kWidth results of type Out packed as one aligned store writes them: T's bits (fake quantization) or one byte
/// each (codes).
template <typename Out, int kWidth>
struct OutVec : element::PackedWords<sizeof(Out), kWidth> {
  using element::PackedWords<sizeof(Out), kWidth>::kWords;
  using element::PackedWords<sizeof(Out), kWidth>::w;
  /// One aligned store of kWords words (16, 8 or 4 bytes).
  __device__ __forceinline__ void Store(Out* p) const {
    if constexpr (kWords == 4) {
      *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
    } else if constexpr (kWords == 2) {
      *reinterpret_cast<uint2*>(p) = make_uint2(w[0], w[1]);
    } else {
      *reinterpret_cast<uint32_t*>(p) = w[0];
    }
  }
};

/// A result's stored bits: T's for fake quantization (Out == T), the code byte for codes (Out == uint8_t).
template <typename Out>
__device__ __forceinline__ uint32_t OutBits(Out* tag, float in, float out) {
  return ResultBits(tag, in, out);
}
__device__ __forceinline__ uint32_t OutBits(uint8_t*, float, uint8_t code) { return code; }

template <typename Out, typename R>
__device__ __forceinline__ void StoreOne(Out* p, int64_t i, float in, R r) {
  if constexpr (sizeof(Out) == 1) {
    p[i] = static_cast<uint8_t>(r);
  } else {
    StoreResult(p, i, in, r);
  }
}

/// y[i] = op.Bind(channel of i)(x[i]) over an [outer, channels, inner] layout laid out by `plan`: Bind loads a
/// channel's parameters, and the bound function returns a float (Out == T) or a uint8_t code (Out == uint8_t).
template <typename T, typename Out, typename Index, typename Op>
__global__ void MapKernel(const T* x, Out* y, element::VecPlan<Index> plan, Index inner, Index channels, Op op) {
  constexpr int kWidth = kVecWidth<T>;
  const Index items = plan.Items();
  const Index stride = static_cast<Index>(gridDim.x) * blockDim.x;
  for (Index item = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; item < items; item += stride) {
    if (item < plan.vectors) {
      const Index i = plan.VectorStart(item);
      float v[kWidth];
      LoadVec(x + i, v);
      element::ChannelCursor<Index> cursor(i, inner, channels);
      OutVec<Out, kWidth> out;
      if (cursor.SameChannelFor(kWidth)) {  // per tensor, and most vectors of per-channel / per-group layouts
        const auto f = op.Bind(cursor.channel);
#pragma unroll
        for (int k = 0; k < kWidth; ++k) out.Set(k, OutBits(y, v[k], f(v[k])));
      } else {
#pragma unroll
        for (int k = 0; k < kWidth; ++k) {
          out.Set(k, OutBits(y, v[k], op.Bind(cursor.channel)(v[k])));
          cursor.Next();
        }
      }
      out.Store(y + i);
    } else {
      const Index i = plan.ScalarIndex(item - plan.vectors);
      const float v = Load(x, i);
      StoreOne(y, i, v, op.Bind(element::ChannelOf(i, inner, channels))(v));
    }
  }
}

/// Launches MapKernel over the layout of `a` (n = outer * channels * inner elements), in 32-bit indices when n
/// allows; vectors where x and y are aligned alike.
template <typename T, typename Out, typename Op>
int LaunchMap(const T* x, Out* y, const CudaAffineArgs& a, void* stream, const Op& op) {
  const int64_t n = a.outer * a.channels * a.inner;
  if (n == 0) return 0;
  const element::VecPlan<int64_t> plan =
      element::MakeVecPlan(reinterpret_cast<uintptr_t>(x), sizeof(T), reinterpret_cast<uintptr_t>(y), sizeof(Out), n,
                           kVecWidth<T>);
  auto s = static_cast<cudaStream_t>(stream);
  if (element::Fits32(n)) {
    auto kernel = MapKernel<T, Out, uint32_t, Op>;
    kernel<<<GridBlocksFor(kernel, plan.Items()), kThreads, 0, s>>>(
        x, y, plan.As<uint32_t>(), static_cast<uint32_t>(a.inner), static_cast<uint32_t>(a.channels), op);
  } else {
    auto kernel = MapKernel<T, Out, int64_t, Op>;
    kernel<<<GridBlocksFor(kernel, plan.Items()), kThreads, 0, s>>>(x, y, plan, a.inner, a.channels, op);
  }
  return LastLaunchError();
}

}  // namespace quark::kernels::cuda
