#include "core/estimate/shape_tensors.h"

#include <algorithm>
#include <map>
#include <utility>

namespace quark::estimate {

void AddTensors(const std::vector<checkpoint::TensorSpec>& tensors, checkpoint::StDType dtype,
                const std::function<bool(const std::string&)>& outside_forward, ModelShape& shape) {
  std::map<int64_t, int64_t> layer_params;
  for (const checkpoint::TensorSpec& spec : tensors) {
    int64_t elements = 1;
    for (int64_t d : spec.shape) elements *= d;
    const bool outside = outside_forward && outside_forward(spec.name);
    TensorShape t{spec.name, dtype, spec.shape, static_cast<uint64_t>(elements) * checkpoint::StDTypeSize(dtype),
                  outside ? -1 : LayerIndex(spec.name)};
    shape.weight_bytes += t.bytes;
    shape.params_total += elements;
    if (t.layer >= 0) layer_params[t.layer] += elements;
    if (!outside && (spec.role == checkpoint::TensorRole::kEmbedding || spec.role == checkpoint::TensorRole::kLinearWeight)) {
      const std::string module = spec.name.substr(0, spec.name.size() - std::string(".weight").size());
      shape.modules.push_back({module, spec.role == checkpoint::TensorRole::kEmbedding ? "Embedding" : "Linear", spec.shape});
    }
    shape.tensors.push_back(std::move(t));
  }
  for (const auto& [layer, params] : layer_params) {
    shape.max_layer_params = std::max(shape.max_layer_params, params);
    shape.layer_params_total += params;
  }
}

ModelShape MoeModelShape(checkpoint::ModelConfig base, const MoeFields& moe,
                         const std::vector<checkpoint::TensorSpec>& tensors, checkpoint::StDType dtype,
                         const std::function<bool(const std::string&)>& outside_forward) {
  ModelShape shape;
  shape.config = std::move(base);
  shape.config.family = checkpoint::ArchFamily::kMoe;
  shape.config.num_experts = moe.experts;
  shape.config.num_experts_per_tok = moe.experts_per_token;
  shape.config.moe_intermediate_size = moe.expert_intermediate;
  shape.model_dtype = dtype;
  shape.num_layers = shape.config.num_hidden_layers;
  AddTensors(tensors, dtype, outside_forward, shape);
  return shape;
}

}  // namespace quark::estimate
