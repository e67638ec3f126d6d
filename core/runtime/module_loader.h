// Builds modules from a WeightSource, checking every shape against the config.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/checkpoint/model_layout.h"
#include "core/runtime/decoder_layer.h"
#include "core/runtime/linear.h"
#include "core/runtime/weight_source.h"

namespace quark::runtime {

/// `name` as a `dtype` tensor of exactly `shape`; InvalidArgument naming the tensor and both shapes otherwise.
absl::StatusOr<at::Tensor> LoadChecked(const WeightSource& weights, const std::string& name,
                                       const std::vector<int64_t>& shape, at::ScalarType dtype);

/// The FloatLinear `prefix + spec.relative_name` (".weight" [out, in], ".bias" [out] when spec.has_bias).
absl::StatusOr<std::shared_ptr<LinearLike>> LoadLinear(const WeightSource& weights, const std::string& prefix,
                                                       const checkpoint::LinearSpec& spec, at::ScalarType dtype);

/// A layer's linears: LoadLinear for each of `specs` (checkpoint::LayerLinears' order) into the member of the slot at
/// its index. InternalError naming the layer and both counts when they differ (a layout this runtime's layer does not
/// build), else the first load error.
absl::Status LoadLinears(const WeightSource& weights, const std::string& prefix,
                         const std::vector<checkpoint::LinearSpec>& specs, const std::vector<LinearSlot>& slots,
                         at::ScalarType dtype);

}  // namespace quark::runtime
