// Maps the Config's enums onto the kernels' format, rounding and MX arguments.
#pragma once

#include <ATen/ATen.h>

#include <optional>

#include "core/config/quant_spec.h"
#include "kernels/cpu/affine_kernels.h"
#include "kernels/cpu/format_traits.h"
#include "kernels/cpu/mx_kernels.h"
#include "kernels/cpu/rounding.h"

namespace quark {

/// The element format of an integer or small-float dtype; nullopt for casts and the legacy `mx` marker.
std::optional<kernels::ElemFormat> ElemFormatOf(DType dtype);

kernels::RoundMode RoundModeOf(RoundMethod method);

/// The integer (affine) kernels' arguments for an integer spec: `scale` and `zero_point` are the parameters as
/// float32 contiguous tensors (kept alive by the caller: the arguments point into them); `float_zero_point` is
/// whether the spec's zero point is a float (the parameters' own zero_point dtype is not int32).
kernels::AffineArgs AffineArgsOf(const QuantSpec& spec, const at::Tensor& scale, const at::Tensor& zero_point,
                                 bool float_zero_point);

/// MX arguments of a spec whose IsMx() is true (element = spec.ElementType()).
kernels::MxArgs MxArgsOf(const QuantSpec& spec);

/// Whether LibTorch tensors of this dtype can be quantized here (float32, bfloat16, float16).
bool IsSupportedInputDtype(at::ScalarType t);

}  // namespace quark
