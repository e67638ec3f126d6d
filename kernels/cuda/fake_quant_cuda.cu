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
    Store(y, i, element::AffineFake<kMode, kFloatZp>(Load(x, i), a.scale[c], a.inv_scale[c], a.zero_point[c], qmin, qmax));
  }
}

template <typename T>
__global__ void FakeFloatKernel(const T* x, T* y, CudaAffineArgs a, GridArgs g, int64_t n) {
  QUARK_GRID_STRIDE(i, n) {
    const float s = a.scale[(i / a.inner) % a.channels];
    Store(y, i, element::ScaledGridValue(Load(x, i), s, g) * s);
  }
}

// The block's amax over a warp (one lane per element; NaN ignored, as the CPU's block amax does).
__device__ __forceinline__ float WarpAmax(float v) {
  float amax = element::Float(element::Bits(v) & 0x7FFFFFFFu);
  amax = amax != amax ? 0.0f : amax;
  for (int off = 16; off > 0; off >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, off));
  return amax;
}

// One warp per MX block of 32 elements.
template <int kMode, typename T>
__global__ void FakeMxKernel(const T* x, T* y, CudaMxArgs a) {
  const int64_t blocks_per_row = (a.len + 31) / 32;
  const int64_t warp = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= a.rows * blocks_per_row) return;  // whole warps leave together: the shuffle below sees all 32 lanes
  const int64_t row = warp / blocks_per_row;
  const int64_t col = (warp % blocks_per_row) * 32 + lane;
  const bool valid = col < a.len;
  const int64_t i = row * a.len + col;
  const float v = valid ? Load(x, i) : 0.0f;
  const int e = element::MxSharedExponent(WarpAmax(v), a.elem_mbits, a.emax, a.mode);
  const int shift = a.is_int ? 6 : 0;
  const float scaled = element::ScaleByPow2(v, shift - e);
  const float r = a.is_int ? element::MxIntValue<kMode>(scaled, 1.0f) : element::GridSat(scaled, a.grid);
  if (valid) Store(y, i, r * element::Pow2(e - shift));
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
