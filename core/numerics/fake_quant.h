// Fake quantization (quantize + dequantize, same dtype out) of a float32 / bfloat16 / float16 tensor.
#pragma once

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"
#include "core/numerics/quant_params.h"
#include "core/numerics/tensor_role.h"

namespace quark {

/// x' = dequantize(quantize(x)) with the given parameters (shapes as in QuantParams; MX scales are powers of two).
/// bfloat16 / float16 dtypes are a cast there and back (params unused). Returns a new contiguous tensor of x's shape
/// and dtype. Errors: INVALID_ARGUMENT naming the field (spec, dtype, params shape).
absl::StatusOr<at::Tensor> FakeQuantize(const at::Tensor& x, const QuantSpec& spec, const QuantParams& params,
                                        TensorRole role = TensorRole::kWeight);

/// As FakeQuantize, writing into `out` (same shape and dtype as x, contiguous; may be x itself when x is contiguous):
/// no allocation for per_tensor / per_channel / per-token / per_group on the last axis / MX on the last axis.
absl::Status FakeQuantizeInto(const at::Tensor& x, const QuantSpec& spec, const QuantParams& params, at::Tensor& out,
                              TensorRole role = TensorRole::kWeight);

/// Parameters computed from x itself, then applied (per token, per group, per tensor, MX: one pass for MX).
absl::StatusOr<at::Tensor> FakeQuantizeDynamic(const at::Tensor& x, const QuantSpec& spec,
                                               TensorRole role = TensorRole::kWeight);

/// Parameters of x alone with the spec's observer (what one calibration batch gives).
absl::StatusOr<QuantParams> ParamsOf(const at::Tensor& x, const QuantSpec& spec, TensorRole role);

/// Checks that x can be quantized (defined, float32 / bfloat16 / float16). FakeQuantize*, ParamsOf with the MinMax
/// or MX observer and MinMaxOf run on the tensor's own device (quant_kernels.h); what reads tensor memory directly
/// (real quantization, histogram observers) copies a device tensor to the host first.
absl::Status CheckInput(const at::Tensor& x);

/// NVFP4 parameters: a global scale, and block scales of param_shape or none (a dynamic input's).
absl::Status CheckNvfp4Params(const QuantParams& params, const std::vector<int64_t>& param_shape);

/// Checks params against the layout's param_shape; the message names the tensor ("scale") and both shapes.
absl::Status CheckParams(const QuantParams& params, const std::vector<int64_t>& param_shape);

}  // namespace quark
