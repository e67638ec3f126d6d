// CUDA real quantization: the codes an export stores (integer, small-float, MX with E8M0 scales). The element math
// is kernels/element/element_ops.h, the CPU kernels' own.
#include "kernels/cuda/cuda_launch.cuh"

namespace quark::kernels::cuda {
namespace {

template <int kMode, typename T>
__global__ void AffineCodesKernel(const T* x, uint8_t* codes, CudaAffineArgs a, int64_t n) {
  const float qmin = static_cast<float>(a.qmin);
  const float qmax = static_cast<float>(a.qmax);
  QUARK_GRID_STRIDE(i, n) {
    const int64_t c = (i / a.inner) % a.channels;
    const int q = static_cast<int>(element::AffineRealCode<kMode>(Load(x, i), a.inv_scale[c], a.zero_point[c], qmin, qmax));
    codes[i] = static_cast<uint8_t>(q);  // int8 two's complement or uint8: the low byte either way
  }
}

template <typename T>
__global__ void FloatCodesKernel(const T* x, uint8_t* codes, CudaAffineArgs a, GridArgs g, GridCodeArgs gc,
                                 int64_t n) {
  QUARK_GRID_STRIDE(i, n) {
    const float s = a.scale[(i / a.inner) % a.channels];
    codes[i] = element::EncodeGridValue(element::ScaledGridValue(Load(x, i), s, g), gc);
  }
}

// One warp per MX block: the amax with NaN ignored, the E8M0 exponent, then each lane's code.
template <int kMode, typename T>
__global__ void MxCodesKernel(const T* x, uint8_t* codes, uint8_t* e8m0, CudaMxArgs a, GridCodeArgs gc) {
  const MxLane l = MxLaneOf(a.rows, a.len);
  if (!l.active) return;
  const float v = l.valid ? Load(x, l.index) : 0.0f;
  const int e = element::MxSharedExponent(WarpAmax(v), a.elem_mbits, a.emax, a.mode);
  if (l.lane == 0) e8m0[l.block] = static_cast<uint8_t>(e + 127);
  if (!l.valid) return;
  const int64_t i = l.index;
  const int shift = a.is_int ? 6 : 0;
  const float scaled = element::ScaleByPow2(v, shift - e);
  if (a.is_int) {
    const float q = element::Clamp(element::Round<kMode>(element::Clamp(scaled, -128.0f, 128.0f)), -127.0f, 127.0f);
    codes[i] = static_cast<uint8_t>(static_cast<int8_t>(q != q ? 0 : static_cast<int>(q)));  // no NaN code: 0
  } else {
    codes[i] = element::EncodeGridValue(element::GridSat(scaled, a.grid), gc);
  }
}

}  // namespace

int QuantizeAffineCuda(const void* x, uint8_t* codes, CudaElem elem, const CudaAffineArgs& args, void* stream) {
  const int64_t n = args.outer * args.channels * args.inner;
  if (n == 0) return 0;
  return DispatchElem(elem, [&](auto t) {
    using T = decltype(t);
    return DispatchRound(args.round_mode, [&](auto mode) {
      AffineCodesKernel<decltype(mode)::value, T><<<GridBlocks(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
          static_cast<const T*>(x), codes, args, n);
      return LastLaunchError();
    });
  });
}

int QuantizeFloatCuda(const void* x, uint8_t* codes, CudaElem elem, const CudaAffineArgs& args, const GridArgs& grid,
                      const GridCodeArgs& code, void* stream) {
  const int64_t n = args.outer * args.channels * args.inner;
  if (n == 0) return 0;
  return DispatchElem(elem, [&](auto t) {
    using T = decltype(t);
    FloatCodesKernel<T><<<GridBlocks(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const T*>(x), codes, args, grid, code, n);
    return LastLaunchError();
  });
}

int QuantizeMxCuda(const void* x, uint8_t* codes, uint8_t* e8m0, CudaElem elem, const CudaMxArgs& args,
                   const GridCodeArgs& code, void* stream) {
  const int64_t threads = args.rows * ((args.len + 31) / 32) * 32;
  if (threads == 0) return 0;
  return DispatchElem(elem, [&](auto t) {
    using T = decltype(t);
    return DispatchRound(args.round_mode, [&](auto mode) {
      MxCodesKernel<decltype(mode)::value, T><<<GridBlocks(threads), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
          static_cast<const T*>(x), codes, e8m0, args, code);
      return LastLaunchError();
    });
  });
}

}  // namespace quark::kernels::cuda
