// How GPTQ quantizes one column of a weight under a spec: what both implementations of the column loop (gptq.cc on
// the CPU's own kernels, gptq_tensor_ops.cc in tensor operations on any device) resolve from the spec and the
// weight's shape before any work, so that they accept the same specs with the same messages.
#pragma once

#include <cstdint>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"

namespace quark::algorithms {

struct GptqOptions;

struct GptqColumnPlan {
  /// The spec applied to one [N, 1] column with that column's parameters (per group: groups of one element; MX keeps
  /// its block spec, a one-element tail block).
  QuantSpec column_spec;
  /// per_group or MX: parameters per group of input columns.
  bool grouped = false;
  int64_t group_size = 0;  // grouped only
};

/// INVALID_ARGUMENT naming the field for a spec GPTQ cannot run on a weight of `sizes` ([N, K]): dynamic, a cast,
/// per_token, channels or groups on the wrong axis, act order with groups observed as they start.
absl::StatusOr<GptqColumnPlan> PlanGptqColumns(const QuantSpec& spec, at::IntArrayRef sizes, const GptqOptions& options);

}  // namespace quark::algorithms
