// Builds modules from a WeightSource, checking every shape against the config.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/checkpoint/model_layout.h"
#include "core/runtime/linear.h"
#include "core/runtime/weight_source.h"

namespace quark::runtime {

/// `name` as a `dtype` tensor of exactly `shape`; InvalidArgument naming the tensor and both shapes otherwise.
absl::StatusOr<at::Tensor> LoadChecked(const WeightSource& weights, const std::string& name,
                                       const std::vector<int64_t>& shape, at::ScalarType dtype);

/// The FloatLinear `prefix + spec.relative_name` (".weight" [out, in], ".bias" [out] when spec.has_bias).
absl::StatusOr<std::shared_ptr<LinearLike>> LoadLinear(const WeightSource& weights, const std::string& prefix,
                                                       const checkpoint::LinearSpec& spec, at::ScalarType dtype);

}  // namespace quark::runtime
