// NVFP4 (formats-2026.md 1.6): fp4 e2m1 elements in groups of 16 consecutive values, one float8_e4m3fn scale per
// group and one float32 global scale per tensor (Quark's `weight_scale_2` / `input_scale_2`, a dequant multiplier:
// amax / (6 * 448)). Data is viewed as [rows, len], contiguous, len a multiple of 16 (callers check it). The
// per-element math is in kernels/element/element_ops.h (Nvfp4*), shared with any device kernel.
#pragma once

#include <cstdint>

#include "kernels/element/element_ops.h"

namespace quark::kernels {

inline constexpr int64_t kNvfp4Group = element::kNvfp4Group;

/// Global scale of a tensor whose amax is `amax` (see element::Nvfp4GlobalScale).
using element::Nvfp4GlobalScale;

/// max |x| over n values (NaN ignored; 0 for n == 0).
template <typename T>
float Nvfp4Amax(const T* x, int64_t n);

/// Block scales of every group, as float32 values of float8_e4m3fn: blk is [rows, len / 16].
template <typename T>
void Nvfp4BlockScales(const T* x, int64_t rows, int64_t len, float global, float* blk);

/// Fake quantization with global scale `global`; `blk` ([rows, len / 16], e4m3 values) or nullptr to compute each
/// group's scale from x (dynamic activations). y may alias x.
template <typename T>
void Nvfp4FakeQuant(const T* x, T* y, int64_t rows, int64_t len, float global, const float* blk);

/// One element a row with that row's group scale `blk[r]`, as Nvfp4FakeQuant rounds it in T: x and y are float32
/// (a column of GPTQ's working weight), x[r] is first rounded to T and y[r] is T's result widened. Serial: GPTQ's
/// CPU loop calls it inside its own row-range threads.
template <typename T>
void Nvfp4FakeQuantColumn(const float* x, float* y, int64_t rows, float global, const float* blk);

/// Codes (one fp4 code per byte: sign << 3 | index) and the float8_e4m3fn bytes of the block scales ([rows, len/16]);
/// `blk` as for Nvfp4FakeQuant.
template <typename T>
void Nvfp4Quantize(const T* x, uint8_t* codes, uint8_t* scale_e4m3, int64_t rows, int64_t len, float global,
                   const float* blk);

/// y = (e2m1(code) * e4m3(scale)) * global.
template <typename T>
void Nvfp4Dequantize(const uint8_t* codes, const uint8_t* scale_e4m3, T* y, int64_t rows, int64_t len, float global);

/// Scalar reference of a whole tensor's fake quantization (float32, [rows, len], len % 16 == 0): the global scale
/// from the tensor's amax, or `global` when it is positive. Written with the traits table's round_ref functions.
void Nvfp4FakeQuantRef(const float* x, float* y, int64_t rows, int64_t len, float global = 0.0f);

}  // namespace quark::kernels
