// Filling a ModelShape from a family's tensor list without a model folder (DeepSeek-V3, gpt-oss, Llama 4): bytes,
// parameter counts per decoder layer, and the quantizable modules (embeddings and linear weights).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/checkpoint/dtype.h"
#include "core/checkpoint/model_layout.h"
#include "core/estimate/model_shape.h"

namespace quark::estimate {

/// Adds every tensor of `tensors` in `dtype` to `shape` (tensors, weight_bytes, params_total, modules,
/// max_layer_params, layer_params_total). A tensor for which `outside_forward` is true (DeepSeek's MTP layer) counts
/// in the bytes but belongs to no decoder layer and is no module.
void AddTensors(const std::vector<checkpoint::TensorSpec>& tensors, checkpoint::StDType dtype,
                const std::function<bool(const std::string&)>& outside_forward, ModelShape& shape);

/// The MoE fields of a family's model: its routed experts, how many a token takes, and an expert's width.
struct MoeFields {
  int64_t experts = 0;
  int64_t experts_per_token = 0;
  int64_t expert_intermediate = 0;
};

/// A MoE family's shape: `base` (a kMoe config with `moe`'s fields) in `dtype`, with `tensors` added as AddTensors does.
ModelShape MoeModelShape(checkpoint::ModelConfig base, const MoeFields& moe,
                         const std::vector<checkpoint::TensorSpec>& tensors, checkpoint::StDType dtype,
                         const std::function<bool(const std::string&)>& outside_forward = nullptr);

}  // namespace quark::estimate
