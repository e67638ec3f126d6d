// NVFP4 (scale_format e4m3) on tensors: fake quantization, real quantization for export and its inverse. The
// groups of 16 run along the last axis (ResolveLayout has checked that it divides). Runs on the CPU kernels
// (kernels/cpu/nvfp4_kernels.h): a tensor on another device is copied there and the result copied back.
#pragma once

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"
#include "core/numerics/quant_params.h"
#include "core/numerics/real_quant.h"

namespace quark {

/// x' with `params` (block scales [..., K/16] as float32 e4m3 values and the global scale), or with only
/// params->global_scale (a dynamic input: each group's scale from x), or params == nullptr (the global scale from x's
/// own amax too). Same shape and dtype as x; written into `*dest` when given (contiguous, x's shape and dtype).
at::Tensor Nvfp4FakeQuantize(const at::Tensor& x, const QuantParams* params, at::Tensor* dest = nullptr);

/// Codes (uint8, one fp4 code per element, x's shape), block scales (uint8 float8_e4m3fn bytes, [..., K/16]),
/// int32 zero points and the float32 global scale; params as for Nvfp4FakeQuantize.
RealQuantized Nvfp4QuantizeReal(const at::Tensor& x, const QuantParams* params);

/// (e2m1(code) * e4m3(scale)) * global in `dtype`.
at::Tensor Nvfp4DequantizeReal(const RealQuantized& q, at::ScalarType dtype);

/// NVFP4 parameters of weight `w` ([out, in]) under the global scale of `global_amax` (the largest amax of the
/// fused shards sharing it, as vLLM needs): INVALID_ARGUMENT naming the rule when in % 16 != 0.
absl::StatusOr<QuantParams> Nvfp4ParamsOf(const at::Tensor& w, const QuantSpec& spec, float global_amax);

/// max |x| (NaN ignored): the amax a global scale is computed from.
float Nvfp4AmaxOf(const at::Tensor& x);

}  // namespace quark
