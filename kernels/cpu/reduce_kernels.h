// Min / max reductions in one pass over memory, at the granularity of a ChannelLayout or of MX blocks.
// LibTorch 1.13 has no bfloat16 / float16 aminmax on CPU, and these feed dynamic quantization's hot path.
#pragma once

#include <cstdint>

#include "kernels/cpu/channel_loops.h"

namespace quark::kernels {

/// min[c], max[c] over every element of channel c (float32 results; exact for every input dtype).
/// A NaN anywhere in a channel makes both its min and max NaN (as LibTorch's aminmax); +-Inf count as values.
template <typename T>
void ChannelMinMax(const T* x, const ChannelLayout& layout, float* min, float* max);

/// amax[k] = max |x| over MX block k of [rows, len] (blocks of 32 along len; short tail blocks); NaN propagates.
template <typename T>
void MxBlockAmax(const T* x, int64_t rows, int64_t len, float* amax);

}  // namespace quark::kernels
