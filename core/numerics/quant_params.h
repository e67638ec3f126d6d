// Scales and zero points from observed ranges (numerics.md, "Integer scale and zero point", "Float formats with a
// scale", "MX shared scale per block", "Scale dtype").
#pragma once

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"

namespace quark {

/// Quantization parameters of one tensor. Both have the layout's param_shape (see quant_layout.h):
/// per_tensor (), per_channel (C), per_group (..., len / group_size), per token (..., 1), MX (..., ceil(len / 32)).
struct QuantParams {
  /// Scale dtype per scale_type: `float` = the dtype of the observed min/max (the model's dtype), float32 / float16 /
  /// bfloat16 as named, pof2 and MX float32 (powers of two).
  at::Tensor scale;
  /// int32 (integer-valued) or float32 (zero_point_type float32); zeros for symmetric, float formats and MX.
  at::Tensor zero_point;
  /// NVFP4 (scale_format e4m3) only: the float32 global scale, shape () (Quark's `*_scale_2`); `scale` then holds
  /// the float8_e4m3fn block scales as float32 values. A dynamic NVFP4 input has a global scale and no `scale`.
  at::Tensor global_scale;
};

/// `params` with every tensor in host memory (the same tensors when they are there already).
QuantParams OnHost(const QuantParams& params);

/// Computes the parameters elementwise from `min` and `max` (same shape, float32 / bfloat16 / float16). For MX the
/// block amax is max(|min|, |max|). Scale math runs in the scale dtype for scale_type float (each operation rounded
/// to it, as LibTorch does for a bfloat16 model), else in float32 with the scale cast at the end.
/// Errors: INVALID_ARGUMENT for mismatched shapes, unsupported dtypes or an invalid spec.
absl::StatusOr<QuantParams> ComputeQuantParams(const at::Tensor& min, const at::Tensor& max, const QuantSpec& spec);

/// NVFP4 parameters of groups whose amax is `block_amax` (any shape) under the global scale of `global_amax` (the
/// tensor's amax, or the largest of fused shards' so that they share one global scale).
QuantParams Nvfp4Params(const at::Tensor& block_amax, float global_amax);

/// The dtype ComputeQuantParams gives the scale for min/max of dtype `observed`.
at::ScalarType ScaleDtypeFor(const QuantSpec& spec, at::ScalarType observed);

}  // namespace quark
