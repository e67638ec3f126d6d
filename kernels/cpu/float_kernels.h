// Small float formats (fp8 / fp6 / fp4) with a float scale per tensor, channel or group (numerics.md, "Float
// formats with a scale"): x' = round_fmt(clamp(x / s, -fmax, fmax)) * s, round-to-nearest-even onto the grid.
#pragma once

#include <cstdint>

#include "kernels/cpu/channel_loops.h"
#include "kernels/cpu/format_traits.h"

namespace quark::kernels {

/// Unscaled rounding of every element onto the format's grid (NaN / Inf pass through). y may alias x.
template <typename T>
void RoundToFormat(const T* x, T* y, int64_t n, ElemFormat format);

/// Scaled fake quantization; `scale` has layout.channels float32 values. NaN stays NaN, +-Inf saturate.
template <typename T>
void FakeQuantFloat(const T* x, T* y, const ChannelLayout& layout, const float* scale, ElemFormat format);

/// Codes (one per byte, low `bits` bits) of the scaled values; NaN gives the NaN code (fp8) or +0.
template <typename T>
void QuantizeFloat(const T* x, uint8_t* codes, const ChannelLayout& layout, const float* scale, ElemFormat format);

/// y = decode(code) * s.
template <typename T>
void DequantizeFloat(const uint8_t* codes, T* y, const ChannelLayout& layout, const float* scale, ElemFormat format);

/// Encodes float32 values already on the grid (e.g. a rounded tensor) into codes.
void EncodeGridValues(const float* v, uint8_t* codes, int64_t n, ElemFormat format);

}  // namespace quark::kernels
