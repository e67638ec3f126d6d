// #30 W4A8: Quark's ProgressiveSpec (`int4_fp8`, spec.fp8_first_stage) on tensors, as Quark's SequentialQuantize runs
// it (formats-2026.md 1.7, 9): both stages real-quantize forward, then dequantize in reverse, in float32.
//   stage 0: s0 = max(|min|, |max|) / 448 (float32; 0 gives eps), v = e4m3(clamp(x / s0, +-448)) (fp8 values);
//   stage 1: the spec's int4 grid per output channel over v: s1 = max(-min(v, 0), max(v, 0)) / 7.5 (eps floor),
//            q = clamp(round_half_even(v * (1 / s1)), -8, 7);
//   x' = ((q - z) * s1) * s0, cast to x's dtype.
// QuantParams carry s1 in `scale`, z in `zero_point` ([out]) and s0 in `global_scale` (float32, shape ()): what
// HF-quark exports as weight_scale_2, weight_zero_point_2 and weight_scale. CPU tensors (real quantization copies).
#pragma once

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"
#include "core/numerics/quant_params.h"
#include "core/numerics/real_quant.h"
#include "core/numerics/tensor_role.h"

namespace quark {

/// The fp8_e4m3 per-tensor first stage (static, min_max, float32 scale).
QuantSpec Fp8FirstStageSpec();
/// `spec` without its first stage: the int4 per-channel second stage alone.
QuantSpec SecondStageSpec(const QuantSpec& spec);

/// v: the fp8 values of x under the first-stage scale `s0` (float32, shape ()), as float32 in x's shape.
absl::StatusOr<at::Tensor> Fp8StageValues(const at::Tensor& x, const at::Tensor& s0);

/// Both stages' parameters from x alone (the weight's one calibration batch).
absl::StatusOr<QuantParams> ProgressiveParamsOf(const at::Tensor& x, const QuantSpec& spec, TensorRole role);

/// INVALID_ARGUMENT naming the tensor when `params` lack the first-stage global_scale or do not fit param_shape.
absl::Status CheckProgressiveParams(const QuantParams& params, const std::vector<int64_t>& param_shape);

absl::StatusOr<at::Tensor> ProgressiveFakeQuantize(const at::Tensor& x, const QuantSpec& spec,
                                                   const QuantParams& params, TensorRole role);

/// int4 codes (int8 values, x's shape), s1 / z ([out]) and s0 as global_scale.
absl::StatusOr<RealQuantized> ProgressiveQuantizeReal(const at::Tensor& x, const QuantSpec& spec,
                                                      const QuantParams& params, TensorRole role);

/// ((q - z) * s1) * s0 in float32, then `dtype`.
absl::StatusOr<at::Tensor> ProgressiveDequantize(const RealQuantized& q, const QuantSpec& spec, at::ScalarType dtype,
                                                 TensorRole role);

}  // namespace quark
