// CUDA quantization kernels on raw device pointers: fake quantization, real quantization (codes) and packing of the
// integer, small-float (fp8 / fp6 / fp4) and OCP MX formats. Every per-element formula is the CPU's own
// (kernels/element/element_ops.h, compiled __host__ __device__ with --fmad=false), so each result is bit-identical to
// the CPU kernel's on the same inputs (kernels/cpu). Plain C++ header: callers need no CUDA headers.
// Every function enqueues on `stream` (a cudaStream_t; nullptr = the legacy default stream) and returns the CUDA error
// code of the launch (0 = success); CudaErrorName() turns it into text. Data are contiguous.
#pragma once

#include <cstdint>

#include "kernels/element/grid_args.h"

namespace quark::kernels::cuda {

/// Element type of x and y (device memory).
enum class CudaElem { kF32, kBF16, kF16 };

/// [outer, channels, inner] layout as in kernels/cpu/channel_loops.h: element (o, c, i) uses parameter c.
/// scale / inv_scale / zero_point are device arrays of `channels` float32 values (inv_scale = 1.0f / scale, computed
/// in float32 by the caller, as the CPU kernels do).
struct CudaAffineArgs {
  int64_t outer = 1;
  int64_t channels = 1;
  int64_t inner = 1;
  const float* scale = nullptr;
  const float* inv_scale = nullptr;
  const float* zero_point = nullptr;  // unused by the float formats
  int qmin = -128;
  int qmax = 127;
  int round_mode = 0;  // RoundMode order: 0 half even, 1 half away from zero, 2 floor
  bool float_zero_point = false;
};

/// OCP MX on [rows, len] (blocks of 32 along len, a shorter tail allowed): the shared exponent from the block's
/// amax (NaN ignored), mode 0 even, 1 floor, 2 ceil; `is_int` selects MXINT8 (element mbits 6, emax 0).
struct CudaMxArgs {
  int64_t rows = 0;
  int64_t len = 0;
  GridArgs grid;       // the element's grid (float elements)
  int elem_mbits = 1;  // mantissa bits of the element (6 for MXINT8)
  int emax = 2;        // largest exponent of the element (0 for MXINT8)
  int mode = 0;
  bool is_int = false;
  int round_mode = 0;  // MXINT8 only
};

/// y = (clamp(round(x * inv) + z, qmin, qmax) - z) * s. y may equal x.
int FakeQuantAffineCuda(const void* x, void* y, CudaElem elem, const CudaAffineArgs& args, void* stream);

/// y = round_grid(clamp(x / s, -max, max)) * s (scale only; zero_point unused). y may equal x.
int FakeQuantFloatCuda(const void* x, void* y, CudaElem elem, const CudaAffineArgs& args, const GridArgs& grid,
                       void* stream);

/// MX fake quantization with the exponents computed from each block. y may equal x.
int FakeQuantMxCuda(const void* x, void* y, CudaElem elem, const CudaMxArgs& args, void* stream);

/// Integer codes: clamp(round(x * inv + z), qmin, qmax), NaN -> qmin; one byte each (int8 two's complement when
/// qmin < 0, else uint8).
int QuantizeAffineCuda(const void* x, uint8_t* codes, CudaElem elem, const CudaAffineArgs& args, void* stream);

/// Small-float codes of the scaled values (low `ebits + mbits + 1` bits of each byte); NaN -> the NaN code or +0.
int QuantizeFloatCuda(const void* x, uint8_t* codes, CudaElem elem, const CudaAffineArgs& args, const GridArgs& grid,
                      const GridCodeArgs& code, void* stream);

/// MX codes (float codes, or MXINT8 two's complement with NaN -> 0) and the E8M0 scales (exponent + 127), one per
/// block: e8m0 is [rows, ceil(len / 32)].
int QuantizeMxCuda(const void* x, uint8_t* codes, uint8_t* e8m0, CudaElem elem, const CudaMxArgs& args,
                   const GridCodeArgs& code, void* stream);

/// codes [n] (n % 8 == 0) -> int32 words [n / 8], nibble i holding code order[i] of each 8.
int PackInt4Cuda(const uint8_t* codes, int64_t n, const int (&order)[8], int32_t* words, void* stream);

/// fp4 codes [n] (n % 2 == 0) -> bytes [n / 2], the even element in the low nibble.
int PackFp4Cuda(const uint8_t* codes, int64_t n, uint8_t* bytes, void* stream);

/// Number of CUDA devices this process can use; 0 when there is no driver or no device (never an error).
int CudaDeviceCount();

const char* CudaErrorName(int code);

}  // namespace quark::kernels::cuda
