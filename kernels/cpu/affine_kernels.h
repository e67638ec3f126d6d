// Integer (affine) fake quantization, real quantization and dequantization (numerics.md, "Integer scale and zero
// point"). T is float, c10::BFloat16 or c10::Half; arithmetic is float32; one pass over memory.
#pragma once

#include <cstdint>

#include "kernels/cpu/channel_loops.h"
#include "kernels/cpu/rounding.h"

namespace quark::kernels {

/// Per-channel parameters, each an array of `layout.channels` float32 values.
struct AffineArgs {
  const float* scale = nullptr;       // s > 0
  const float* zero_point = nullptr;  // integer-valued unless float_zero_point
  int qmin = -128;
  int qmax = 127;
  RoundMode round = RoundMode::kHalfEven;
  /// Float zero point (zero_point_type float32): rounds after adding z, as real quantization does.
  bool float_zero_point = false;
};

/// y = (clamp(round(x * (1/s)) + z, qmin, qmax) - z) * s, cast to T. NaN stays NaN; y may alias x.
template <typename T>
void FakeQuantAffine(const T* x, T* y, const ChannelLayout& layout, const AffineArgs& args);

/// FakeQuantAffine<float> of one contiguous row of n elements, on the calling thread and without allocating: element
/// j uses parameter j (per_element, as a {1, n, 1} layout) or parameter 0 (as {1, 1, n}). inv[j] (or inv[0]) must be
/// 1.0f / args.scale[j], prepared once by callers that quantize many rows with the same parameters (GPTQ's columns).
/// y may alias x.
void FakeQuantAffineRow(const float* x, float* y, int64_t n, const float* inv, bool per_element,
                        const AffineArgs& args);

/// q = clamp(round(x * (1/s) + z), qmin, qmax). Q is int8_t (signed grids) or uint8_t (unsigned). NaN gives qmin.
template <typename T, typename Q>
void QuantizeAffine(const T* x, Q* q, const ChannelLayout& layout, const AffineArgs& args);

/// y = (q - z) * s, cast to T.
template <typename Q, typename T>
void DequantizeAffine(const Q* q, T* y, const ChannelLayout& layout, const AffineArgs& args);

/// Scalar reference of one fake-quantized value (the specification the fast path is tested against).
float FakeQuantAffineRef(float x, float scale, float zero_point, const AffineArgs& args);

}  // namespace quark::kernels
