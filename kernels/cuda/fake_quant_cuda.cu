#include "kernels/cuda/fake_quant_cuda.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace quark::kernels::cuda {
namespace {

__device__ __forceinline__ float Load(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float Load(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ float Load(const __half* p, int64_t i) { return __half2float(p[i]); }
__device__ __forceinline__ void Store(float* p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void Store(__nv_bfloat16* p, int64_t i, float v) { p[i] = __float2bfloat16_rn(v); }
__device__ __forceinline__ void Store(__half* p, int64_t i, float v) { p[i] = __float2half_rn(v); }

__device__ __forceinline__ float Clamp(float v, float lo, float hi) {
  const float a = v < lo ? lo : v;
  return a > hi ? hi : a;
}

__device__ __forceinline__ float Round(float v, int mode) {
  if (mode == 2) return floorf(v);
  if (mode == 1) return roundf(v);  // half away from zero
  return rintf(v);                  // half even
}

__device__ __forceinline__ float GridSat(float x, const CudaGrid& g) {
  const unsigned b = __float_as_uint(x);
  const unsigned sign = b & 0x80000000u;
  const float a = __uint_as_float(b & 0x7FFFFFFFu);
  const float c = a > g.max ? g.max : a;
  int e = static_cast<int>(__float_as_uint(c) >> 23) - 127;
  e = e < g.emin ? g.emin : e;
  const float m = __uint_as_float(static_cast<unsigned>(e - g.mbits + 23 + 127) << 23);
  const float r = __fsub_rn(__fadd_rn(c, m), m);
  return __uint_as_float(__float_as_uint(r) | sign);
}

__device__ __forceinline__ float Pow2(int k) {
  return k >= -126 ? __uint_as_float(static_cast<unsigned>(k + 127) << 23) : __uint_as_float(1u << (k + 149));
}

template <typename T>
__global__ void AffineKernel(const T* x, T* y, CudaAffineArgs a, int64_t n) {
  const float qmin = static_cast<float>(a.qmin);
  const float qmax = static_cast<float>(a.qmax);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = (i / a.inner) % a.channels;
    const float s = a.scale[c];
    const float inv = a.inv_scale[c];
    const float z = a.zero_point[c];
    const float v = Load(x, i);
    float q;
    if (a.float_zero_point) {
      q = Clamp(Round(Clamp(__fadd_rn(__fmul_rn(v, inv), z), qmin - 1.0f, qmax + 1.0f), a.round_mode), qmin, qmax);
    } else {
      q = Clamp(__fadd_rn(Round(Clamp(__fmul_rn(v, inv), qmin - z - 1.0f, qmax - z + 1.0f), a.round_mode), z), qmin,
                qmax);
    }
    Store(y, i, __fmul_rn(__fsub_rn(q, z), s));
  }
}

template <typename T>
__global__ void FloatKernel(const T* x, T* y, CudaAffineArgs a, CudaGrid g, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float s = a.scale[(i / a.inner) % a.channels];
    Store(y, i, __fmul_rn(GridSat(Clamp(__fdiv_rn(Load(x, i), s), -g.max, g.max), g), s));
  }
}

__device__ __forceinline__ int SharedExponent(float amax, const CudaMxArgs& a) {
  unsigned b = __float_as_uint(amax) & 0x7FFFFFFFu;
  if (b == 0) return -126;
  if (a.mode == 0) b = (b + (1u << (23 - a.elem_mbits - 1))) & 0x7F800000u;
  int e = static_cast<int>(b >> 23) - 127;
  if (a.mode == 2 && (b & 0x7FFFFFu) != 0) e += 1;
  e -= a.emax;
  return e < -127 ? -127 : (e > 127 ? 127 : e);
}

// One warp per MX block of 32 elements.
template <typename T>
__global__ void MxKernel(const T* x, T* y, CudaMxArgs a) {
  const int64_t blocks_per_row = (a.len + 31) / 32;
  const int64_t warp = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= a.rows * blocks_per_row) return;
  const int64_t row = warp / blocks_per_row;
  const int64_t col = (warp % blocks_per_row) * 32 + lane;
  const bool valid = col < a.len;
  const int64_t i = row * a.len + col;
  const float v = valid ? Load(x, i) : 0.0f;
  float amax = fabsf(v);
  amax = amax != amax ? 0.0f : amax;  // NaN elements stay NaN but do not set the scale (as on the CPU)
  for (int off = 16; off > 0; off >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, off));
  const int e = SharedExponent(amax, a);
  const int shift = a.is_int ? 6 : 0;
  // 2^(shift - e) is above the largest float for an MXINT8 block with e < -121: scale in two exact steps through
  // 2^64, as the CPU kernels do (ScaleByPow2 in kernels/cpu/mx_kernels.h).
  const int k = shift - e;
  const float scaled = k <= 127 ? __fmul_rn(v, Pow2(k)) : __fmul_rn(__fmul_rn(v, Pow2(64)), Pow2(k - 64));
  const float s = Pow2(e - shift);
  float r;
  if (a.is_int) {
    // A negative element that rounds to zero gives -0, as in AMD Quark (torch.round(x / scale) * scale) and in the
    // CPU loops (RoundKeepSign in kernels/cpu/lane_ops.h). rintf / roundf / floorf already keep the sign of zero;
    // it is set from the element explicitly so that the contract does not hang on the rounding function.
    const float code = Round(Clamp(scaled, -128.0f, 128.0f), a.round_mode);
    r = Clamp(__uint_as_float(__float_as_uint(code) | (__float_as_uint(scaled) & 0x80000000u)), -127.0f, 127.0f);
  } else {
    r = GridSat(scaled, a.grid);
  }
  if (valid) Store(y, i, __fmul_rn(r, s));
}

int Blocks(int64_t n, int threads) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<int>(b < 65535 * 32 ? (b < 1 ? 1 : b) : 65535 * 32);
}

template <template <typename> class Launcher, typename... Args>
int Dispatch(CudaElem elem, Args&&... args) {
  switch (elem) {
    case CudaElem::kBF16:
      return Launcher<__nv_bfloat16>::Run(args...);
    case CudaElem::kF16:
      return Launcher<__half>::Run(args...);
    case CudaElem::kF32:
      break;
  }
  return Launcher<float>::Run(args...);
}

template <typename T>
struct AffineLauncher {
  static int Run(const void* x, void* y, const CudaAffineArgs& a, void* stream) {
    const int64_t n = a.outer * a.channels * a.inner;
    if (n == 0) return 0;
    AffineKernel<T><<<Blocks(n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<const T*>(x),
                                                                                    static_cast<T*>(y), a, n);
    return static_cast<int>(cudaGetLastError());
  }
};

template <typename T>
struct FloatLauncher {
  static int Run(const void* x, void* y, const CudaAffineArgs& a, const CudaGrid& g, void* stream) {
    const int64_t n = a.outer * a.channels * a.inner;
    if (n == 0) return 0;
    FloatKernel<T><<<Blocks(n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<const T*>(x),
                                                                                   static_cast<T*>(y), a, g, n);
    return static_cast<int>(cudaGetLastError());
  }
};

template <typename T>
struct MxLauncher {
  static int Run(const void* x, void* y, const CudaMxArgs& a, void* stream) {
    const int64_t threads = a.rows * ((a.len + 31) / 32) * 32;
    if (threads == 0) return 0;
    MxKernel<T><<<Blocks(threads, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<const T*>(x),
                                                                                      static_cast<T*>(y), a);
    return static_cast<int>(cudaGetLastError());
  }
};

}  // namespace

int FakeQuantAffineCuda(const void* x, void* y, CudaElem elem, const CudaAffineArgs& args, void* stream) {
  return Dispatch<AffineLauncher>(elem, x, y, args, stream);
}

int FakeQuantFloatCuda(const void* x, void* y, CudaElem elem, const CudaAffineArgs& args, const CudaGrid& grid,
                       void* stream) {
  return Dispatch<FloatLauncher>(elem, x, y, args, grid, stream);
}

int FakeQuantMxCuda(const void* x, void* y, CudaElem elem, const CudaMxArgs& args, void* stream) {
  return Dispatch<MxLauncher>(elem, x, y, args, stream);
}

const char* CudaErrorName(int code) { return cudaGetErrorName(static_cast<cudaError_t>(code)); }

}  // namespace quark::kernels::cuda
