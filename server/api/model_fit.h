// #36: whether a job's scheme fits the model's shapes, checked at SubmitJob (and for each sweep candidate) from
// config.json and the safetensors headers alone: the engine's ValidateConfig against the model's modules (group
// sizes, block tiling, exclude patterns) and the exporters' packing rules (core/estimate/export_fit.h). A job that
// would fail on the worker for its shapes is refused here, naming the module, its shape and the rule.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/config/quant_spec.h"
#include "core/estimate/artifact_size.h"
#include "core/estimate/model_shape.h"
#include "google/protobuf/repeated_field.h"
#include "quark/v1/service.pb.h"

namespace quark::server {

/// The exports of a request's export_formats (empty: hf_quark), in order.
std::vector<estimate::ExportKind> ExportKindsOf(const google::protobuf::RepeatedField<int>& formats);

/// The first reason `shape` cannot take `config` (resolved from `spec`) with spec's exports: a ValidateConfig error
/// ("global_quant_config.weight.group_size: 128 does not divide in_features 64 of ..."), else the first export that
/// cannot hold a linear ("hf_quark: model.layers.0.mlp.down_proj (weight [64, 172], global_quant_config): ...
/// uint4 packs 8 values per word, but in_features = 172 is not a multiple of 8"). "" when it fits.
std::string ModelFitProblem(const estimate::ModelShape& shape, const quark::Config& config,
                            const quark::v1::JobSpec& spec);

/// SubmitJob's check on the shape of a model folder read through the tenant's pinned view (SubmitJob reads it once
/// for this and the memory estimate; a model it cannot read is left to the worker, as before): OK when the spec
/// quantizes nothing itself (llama.cpp's own GGUF rules) or when it fits; else INVALID_ARGUMENT "spec.preset: the
/// model's shapes do not take uint4_wo_per_channel: <ModelFitProblem>" (spec.config for an inline Config).
absl::Status CheckSpecFitsModel(const quark::v1::JobSpec& spec, const estimate::ModelShape& shape);

}  // namespace quark::server
