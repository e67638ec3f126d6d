// CUDA real quantization: the codes an export stores (integer, small-float, MX with E8M0 scales). The element math
// is kernels/element/element_ops.h, the CPU kernels' own; the launches (16-byte vector loads, stepped channels,
// 32-bit indices) are kernels/cuda/cuda_map.cuh and cuda_mx.cuh.
#include "kernels/cuda/cuda_mx.cuh"

namespace quark::kernels::cuda {
namespace {

// MapKernel ops: Bind(channel) loads the channel's parameters; the bound op is the CPU's element math.
template <int kMode>
struct AffineCodeOp {
  const float* inv;
  const float* zero;
  float qmin, qmax;
  struct Bound {
    float inv, z, qmin, qmax;
    __device__ __forceinline__ uint8_t operator()(float v) const {
      // int8 two's complement or uint8: the low byte either way
      return static_cast<uint8_t>(static_cast<int>(element::AffineRealCode<kMode>(v, inv, z, qmin, qmax)));
    }
  };
  template <typename Index>
  __device__ __forceinline__ Bound Bind(Index c) const {
    return Bound{inv[c], zero[c], qmin, qmax};
  }
};

struct FloatCodeOp {
  const float* scale;
  GridArgs g;
  GridCodeArgs gc;
  struct Bound {
    float s;
    GridArgs g;
    GridCodeArgs gc;
    __device__ __forceinline__ uint8_t operator()(float v) const {
      return element::EncodeGridValue(element::ScaledGridValue(v, s, g), gc);
    }
  };
  template <typename Index>
  __device__ __forceinline__ Bound Bind(Index c) const {
    return Bound{scale[c], g, gc};
  }
};

// Scalar fallback: one warp per MX block: the amax with NaN ignored, the E8M0 exponent, then each lane's code.
template <int kMode, typename T>
__global__ void MxCodesKernel(const T* x, uint8_t* codes, uint8_t* e8m0, CudaMxArgs a, GridCodeArgs gc) {
  QUARK_WARP_STRIDE(block, a.rows * ((a.len + 31) / 32)) {
    const MxLane l = MxLaneOf(block, a.len);
    const float v = l.valid ? Load(x, l.index) : 0.0f;
    const int e = element::MxSharedExponent(WarpAmax(v), a.elem_mbits, a.emax, a.mode);
    if (l.lane == 0) e8m0[block] = static_cast<uint8_t>(e + 127);
    if (l.valid) codes[l.index] = MxCodeElement<kMode>(v, e, a, gc);
  }
}

// The vectorized MX launch's store: the block's scale (first lane) and the lane's codes in one store.
template <int kMode, typename T, typename Index>
struct MxCodesStore {
  uint8_t* codes;
  uint8_t* e8m0;
  CudaMxArgs a;
  GridCodeArgs gc;
  __device__ __forceinline__ void operator()(const element::MxVecLane<Index>& l, const float (&v)[kVecWidth<T>],
                                             int e) const {
    if (!l.valid) return;
    if (l.leader) e8m0[l.block] = static_cast<uint8_t>(e + 127);
    OutVec<uint8_t, kVecWidth<T>> out;
#pragma unroll
    for (int k = 0; k < kVecWidth<T>; ++k) out.Set(k, MxCodeElement<kMode>(v[k], e, a, gc));
    out.Store(codes + l.index);
  }
};

}  // namespace

int QuantizeAffineCuda(const void* x, uint8_t* codes, CudaElem elem, const CudaAffineArgs& args, void* stream) {
  return DispatchElem(elem, [&](auto t) {
    using T = decltype(t);
    return DispatchRound(args.round_mode, [&](auto mode) {
      const float qmin = static_cast<float>(args.qmin), qmax = static_cast<float>(args.qmax);
      return LaunchMap(static_cast<const T*>(x), codes, args, stream,
                       AffineCodeOp<decltype(mode)::value>{args.inv_scale, args.zero_point, qmin, qmax});
    });
  });
}

int QuantizeFloatCuda(const void* x, uint8_t* codes, CudaElem elem, const CudaAffineArgs& args, const GridArgs& grid,
                      const GridCodeArgs& code, void* stream) {
  return DispatchElem(elem, [&](auto t) {
    using T = decltype(t);
    return LaunchMap(static_cast<const T*>(x), codes, args, stream, FloatCodeOp{args.scale, grid, code});
  });
}

int QuantizeMxCuda(const void* x, uint8_t* codes, uint8_t* e8m0, CudaElem elem, const CudaMxArgs& args,
                   const GridCodeArgs& code, void* stream) {
  const int64_t threads = args.rows * ((args.len + 31) / 32) * 32;
  if (threads == 0) return 0;
  return DispatchElem(elem, [&](auto t) {
    using T = decltype(t);
    return DispatchRound(args.round_mode, [&](auto mode) {
      constexpr int kMode = decltype(mode)::value;
      auto* in = static_cast<const T*>(x);
      if (MxVectorizable<T>(args, x, codes, 1)) {
        return LaunchMxVec(in, args, stream,
                           [&](auto index) { return MxCodesStore<kMode, T, decltype(index)>{codes, e8m0, args, code}; });
      }
      MxCodesKernel<kMode, T><<<GridBlocks(threads), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
          in, codes, e8m0, args, code);
      return LastLaunchError();
    });
  });
}

}  // namespace quark::kernels::cuda
