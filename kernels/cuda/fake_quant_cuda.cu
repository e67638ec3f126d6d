// CUDA fake quantization (quantize + dequantize, same dtype out): integer, small-float and MX formats. The element
// math is kernels/element/element_ops.h, the CPU kernels' own.
#include "kernels/cuda/cuda_launch.cuh"

namespace quark::kernels::cuda {
namespace {

template <int kMode, bool kFloatZp, typename T>
__global__ void FakeAffineKernel(const T* x, T* y, CudaAffineArgs a, int64_t n) {
  const float qmin = static_cast<float>(a.qmin);
  const float qmax = static_cast<float>(a.qmax);
  QUARK_GRID_STRIDE(i, n) {
    const int64_t c = (i / a.inner) % a.channels;
    const float v = Load(x, i);
    StoreResult(y, i, v, element::AffineFake<kMode, kFloatZp>(v, a.scale[c], a.inv_scale[c], a.zero_point[c], qmin, qmax));
  }
}

template <typename T>
__global__ void FakeFloatKernel(const T* x, T* y, CudaAffineArgs a, GridArgs g, int64_t n) {
  QUARK_GRID_STRIDE(i, n) {
    const float s = a.scale[(i / a.inner) % a.channels];
    const float v = Load(x, i);
    StoreResult(y, i, v, element::ScaledGridValue(v, s, g) * s);
  }
}

// One warp per MX block of 32 elements.
template <int kMode, typename T>
__global__ void FakeMxKernel(const T* x, T* y, CudaMxArgs a) {
  const MxLane l = MxLaneOf(a.rows, a.len);
  if (!l.active) return;
  const float v = l.valid ? Load(x, l.index) : 0.0f;
  const int e = element::MxSharedExponent(WarpAmax(v), a.elem_mbits, a.emax, a.mode);
  const int shift = a.is_int ? 6 : 0;
  const float scaled = element::ScaleByPow2(v, shift - e);
  const float r = a.is_int ? element::MxIntValue<kMode>(scaled, 1.0f) : element::GridSat(scaled, a.grid);
  if (l.valid) StoreResult(y, l.index, v, r * element::Pow2(e - shift));
}

}  // namespace

int FakeQuantAffineCuda(const void* x, void* y, CudaElem elem, const CudaAffineArgs& args, void* stream) {
  const int64_t n = args.outer * args.channels * args.inner;
  if (n == 0) return 0;
  return DispatchElem(elem, [&](auto t) {
    using T = decltype(t);
    return DispatchRound(args.round_mode, [&](auto mode) {
      auto* in = static_cast<const T*>(x);
      auto* out = static_cast<T*>(y);
      auto s = static_cast<cudaStream_t>(stream);
      if (args.float_zero_point) {
        FakeAffineKernel<decltype(mode)::value, true><<<GridBlocks(n), kThreads, 0, s>>>(in, out, args, n);
      } else {
        FakeAffineKernel<decltype(mode)::value, false><<<GridBlocks(n), kThreads, 0, s>>>(in, out, args, n);
      }
      return LastLaunchError();
    });
  });
}

int FakeQuantFloatCuda(const void* x, void* y, CudaElem elem, const CudaAffineArgs& args, const GridArgs& grid,
                       void* stream) {
  const int64_t n = args.outer * args.channels * args.inner;
  if (n == 0) return 0;
  return DispatchElem(elem, [&](auto t) {
    using T = decltype(t);
    FakeFloatKernel<T><<<GridBlocks(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const T*>(x), static_cast<T*>(y), args, grid, n);
    return LastLaunchError();
  });
}

int FakeQuantMxCuda(const void* x, void* y, CudaElem elem, const CudaMxArgs& args, void* stream) {
  const int64_t threads = args.rows * ((args.len + 31) / 32) * 32;
  if (threads == 0) return 0;
  return DispatchElem(elem, [&](auto t) {
    using T = decltype(t);
    return DispatchRound(args.round_mode, [&](auto mode) {
      FakeMxKernel<decltype(mode)::value, T><<<GridBlocks(threads), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
          static_cast<const T*>(x), static_cast<T*>(y), args);
      return LastLaunchError();
    });
  });
}

}  // namespace quark::kernels::cuda
