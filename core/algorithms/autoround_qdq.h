// AutoRound's (SignRound's) weight fake-quantizer, differentiable in its tuned tensors: auto-round's
// quant_tensor_asym / quant_tensor_sym (auto_round/data_type/int.py) on the engine's integer grids.
//
//   per group of g inputs:  lo = min(w_min, 0) * min_scale,  hi = max(w_max, 0) * max_scale
//   asymmetric:             s = max((hi - lo) / (qmax - qmin), eps),  zp = clamp(qmin - round(lo / s), qmin, qmax)
//   symmetric:              s = max(max(-lo, hi) / ((qmax - qmin) / 2), eps),  zp = 0
//   w' = s * (clamp(round(w * (1 / s) + v) + zp, qmin, qmax) - zp)   (the engine's quantizer multiplies by 1 / s)
//
// round is the straight-through estimator (forward: half to even; backward: identity), as auto-round's round_ste.
// The scale and zero point are the engine's (ComputeQuantParams: quant_params.cc), so the grid trained on is the
// one exported; auto-round's own symmetric grid (full range, amax / 2^(bits-1)) and fp16 scale are not used.
#pragma once

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"
#include "core/numerics/quant_params.h"

namespace quark::algorithms {

/// The tuned tensors of one weight [N, K] with groups of g (per_channel: g = K).
struct AutoRoundTensors {
  at::Tensor value;      // V [N, K / g, g] float32, starts at 0 (the rounding offset, trained into [-0.5, 0.5])
  at::Tensor min_scale;  // [N, K / g] float32, starts at 1, kept in [0, 1] (auto-round's minmax_scale_bound)
  at::Tensor max_scale;  // [N, K / g] float32, starts at 1, kept in [0, 1]
};

/// The group size AutoRound works with for `spec` on a weight of `in_features` inputs: group_size (-1 or
/// per_channel: in_features). INVALID_ARGUMENT naming "group_size" when it does not divide in_features.
absl::StatusOr<int64_t> AutoRoundGroupSize(const QuantSpec& spec, int64_t in_features);

/// Fresh tensors for `weight` [N, K] (V = 0, scales = 1), requiring grad.
absl::StatusOr<AutoRoundTensors> InitAutoRoundTensors(const at::Tensor& weight, const QuantSpec& spec);

/// w' [N, K] float32 from `weight` [N, K] (any float dtype): differentiable in t's tensors.
at::Tensor AutoRoundQdq(const at::Tensor& weight, const AutoRoundTensors& t, const QuantSpec& spec);

/// The final weight and its parameters: the engine's ComputeQuantParams of the clipped ranges (the spec's scale
/// dtype), the codes round(w / s + v) with them, the weight those codes give in `weight`'s dtype (every value on the
/// grid of `params`: FakeQuantize gives it back). No autograd.
struct AutoRoundWeight {
  at::Tensor weight;  // [N, K] in weight's dtype
  QuantParams params;
};
absl::StatusOr<AutoRoundWeight> FinishAutoRound(const at::Tensor& weight, const AutoRoundTensors& t,
                                                const QuantSpec& spec);

}  // namespace quark::algorithms
