// CUDA fake quantization of int / fp8-fp6-fp4 / MX data on raw device pointers, bit-exact with the CPU kernels
// (kernels/cpu): same formulas, float32 arithmetic, no FMA contraction. Plain C++ header: callers need no CUDA
// headers. Every function enqueues on `stream` (a cudaStream_t, nullptr = default stream) and returns the CUDA
// error code of the launch (0 = success); CudaErrorName() turns it into text.
#pragma once

#include <cstdint>

namespace quark::kernels::cuda {

/// Element type of x and y (device memory, contiguous).
enum class CudaElem { kF32, kBF16, kF16 };

/// [outer, channels, inner] layout as in kernels/cpu/channel_loops.h; scale / zero_point / inv_scale are device
/// arrays of `channels` float32 values (inv_scale = 1.0f / scale, computed by the caller in float32).
struct CudaAffineArgs {
  int64_t outer = 1;
  int64_t channels = 1;
  int64_t inner = 1;
  const float* scale = nullptr;
  const float* inv_scale = nullptr;
  const float* zero_point = nullptr;
  int qmin = -128;
  int qmax = 127;
  int round_mode = 0;  // 0 half even, 1 half away from zero, 2 floor
  bool float_zero_point = false;
};

/// Small float grid: mantissa bits, smallest normal exponent, largest finite value (FormatTraits row).
struct CudaGrid {
  int mbits = 3;
  int emin = -6;
  float max = 448.0f;
};

/// y = (clamp(round(x * inv) + z, qmin, qmax) - z) * s. y may equal x.
int FakeQuantAffineCuda(const void* x, void* y, CudaElem elem, const CudaAffineArgs& args, void* stream);

/// y = round_grid(clamp(x / s, -max, max)) * s with the [outer, channels, inner] layout of `args` (scale only).
int FakeQuantFloatCuda(const void* x, void* y, CudaElem elem, const CudaAffineArgs& args, const CudaGrid& grid,
                       void* stream);

/// OCP MX on [rows, len] (blocks of 32 along len, tails allowed): one warp per block computes the amax, the shared
/// exponent (mode 0 even, 1 floor, 2 ceil; emax / mbits of the element) and the elements. `is_int` selects MXINT8
/// (elements clamp(round(x / (s / 64)), -127, 127) with round_mode).
struct CudaMxArgs {
  int64_t rows = 0;
  int64_t len = 0;
  CudaGrid grid;
  int emax = 2;
  int elem_mbits = 1;
  int mode = 0;
  bool is_int = false;
  int round_mode = 0;
};
int FakeQuantMxCuda(const void* x, void* y, CudaElem elem, const CudaMxArgs& args, void* stream);

const char* CudaErrorName(int code);

}  // namespace quark::kernels::cuda
