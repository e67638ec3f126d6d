// Min / max of a tensor at the granularity of a layout: what MinMax observers and dynamic quantization reduce.
#pragma once

#include <ATen/ATen.h>

#include <utility>

#include "core/numerics/quant_layout.h"

namespace quark {

/// (min, max) in x's dtype with the layout's param_shape. MX gives (-amax, amax) per block (a short tail block
/// counts as zero-padded). x must be non-empty.
std::pair<at::Tensor, at::Tensor> MinMaxOf(const at::Tensor& x, const QuantLayout& layout);

}  // namespace quark
