// CUDA fake quantization (quantize + dequantize, same dtype out): integer, small-float and MX formats. The element
// math is kernels/element/element_ops.h, the CPU kernels' own; the launches (16-byte vectors, stepped channels,
// 32-bit indices) are kernels/cuda/cuda_map.cuh and cuda_mx.cuh.
#include "kernels/cuda/cuda_mx.cuh"

namespace quark::kernels::cuda {
namespace {

// MapKernel ops: Bind(channel) loads the channel's parameters; the bound op is the CPU's element math.
template <int kMode, bool kFloatZp>
struct FakeAffineOp {
  const float* scale;
  const float* inv;
  const float* zero;
  float qmin, qmax;
  struct Bound {
    float s, inv, z, qmin, qmax;
    __device__ __forceinline__ float operator()(float v) const {
      return element::AffineFake<kMode, kFloatZp>(v, s, inv, z, qmin, qmax);
    }
  };
  template <typename Index>
  __device__ __forceinline__ Bound Bind(Index c) const {
    return Bound{scale[c], inv[c], zero[c], qmin, qmax};
  }
};

struct FakeFloatOp {
  const float* scale;
  GridArgs g;
  struct Bound {
    float s;
    GridArgs g;
    __device__ __forceinline__ float operator()(float v) const { return element::ScaledGridValue(v, s, g) * s; }
  };
  template <typename Index>
  __device__ __forceinline__ Bound Bind(Index c) const {
    return Bound{scale[c], g};
  }
};

// Scalar fallback (rows not a whole number of vectors, or misaligned pointers): one warp per MX block of 32.
template <int kMode, typename T>
__global__ void FakeMxKernel(const T* x, T* y, CudaMxArgs a) {
  QUARK_WARP_STRIDE(block, a.rows * ((a.len + 31) / 32)) {
    const MxLane l = MxLaneOf(block, a.len);
    const float v = l.valid ? Load(x, l.index) : 0.0f;
    const int e = element::MxSharedExponent(WarpAmax(v), a.elem_mbits, a.emax, a.mode);
    if (l.valid) StoreResult(y, l.index, v, MxFakeElement<kMode>(v, e, a));
  }
}

// The vectorized MX launch's store: the lane's elements, fake quantized, as one 16-byte store.
template <int kMode, typename T, typename Index>
struct FakeMxStore {
  T* y;
  CudaMxArgs a;
  __device__ __forceinline__ void operator()(const element::MxVecLane<Index>& l, const float (&v)[kVecWidth<T>],
                                             int e) const {
    if (!l.valid) return;
    OutVec<T, kVecWidth<T>> out;
#pragma unroll
    for (int k = 0; k < kVecWidth<T>; ++k) out.Set(k, ResultBits(y, v[k], MxFakeElement<kMode>(v[k], e, a)));
    out.Store(y + l.index);
  }
};

}  // namespace

int FakeQuantAffineCuda(const void* x, void* y, CudaElem elem, const CudaAffineArgs& args, void* stream) {
  return DispatchElem(elem, [&](auto t) {
    using T = decltype(t);
    return DispatchRound(args.round_mode, [&](auto mode) {
      constexpr int kMode = decltype(mode)::value;
      const float qmin = static_cast<float>(args.qmin), qmax = static_cast<float>(args.qmax);
      auto* in = static_cast<const T*>(x);
      auto* out = static_cast<T*>(y);
      if (args.float_zero_point) {
        return LaunchMap(in, out, args, stream,
                         FakeAffineOp<kMode, true>{args.scale, args.inv_scale, args.zero_point, qmin, qmax});
      }
      return LaunchMap(in, out, args, stream,
                       FakeAffineOp<kMode, false>{args.scale, args.inv_scale, args.zero_point, qmin, qmax});
    });
  });
}

int FakeQuantFloatCuda(const void* x, void* y, CudaElem elem, const CudaAffineArgs& args, const GridArgs& grid,
                       void* stream) {
  return DispatchElem(elem, [&](auto t) {
    using T = decltype(t);
    return LaunchMap(static_cast<const T*>(x), static_cast<T*>(y), args, stream, FakeFloatOp{args.scale, grid});
  });
}

int FakeQuantMxCuda(const void* x, void* y, CudaElem elem, const CudaMxArgs& args, void* stream) {
  const int64_t threads = args.rows * ((args.len + 31) / 32) * 32;
  if (threads == 0) return 0;
  return DispatchElem(elem, [&](auto t) {
    using T = decltype(t);
    return DispatchRound(args.round_mode, [&](auto mode) {
      constexpr int kMode = decltype(mode)::value;
      auto* in = static_cast<const T*>(x);
      auto* out = static_cast<T*>(y);
      if (MxVectorizable<T>(args, x, y, sizeof(T))) {
        return LaunchMxVec(in, args, stream,
                           [&](auto index) { return FakeMxStore<kMode, T, decltype(index)>{out, args}; });
      }
      FakeMxKernel<kMode, T><<<GridBlocks(threads), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(in, out, args);
      return LastLaunchError();
    });
  });
}

}  // namespace quark::kernels::cuda
