#include "core/estimate/deepseek_shape.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>

#include "core/checkpoint/deepseek_layout.h"
#include "core/checkpoint/llama4_layout.h"

namespace quark::estimate {

namespace {

// The shape of `tensors` in `dtype`; those `outside` the forward count in the bytes only.
ModelShape ShapeOfTensors(checkpoint::ModelConfig config, const std::vector<checkpoint::TensorSpec>& tensors,
                          checkpoint::StDType dtype, const std::function<bool(const std::string&)>& outside) {
  ModelShape shape;
  shape.config = std::move(config);
  shape.model_dtype = dtype;
  shape.num_layers = shape.config.num_hidden_layers;
  std::map<int64_t, int64_t> layer_params;
  for (const checkpoint::TensorSpec& spec : tensors) {
    int64_t elements = 1;
    for (int64_t d : spec.shape) elements *= d;
    const bool out = outside(spec.name);
    TensorShape t{spec.name, dtype, spec.shape, static_cast<uint64_t>(elements) * checkpoint::StDTypeSize(dtype),
                  out ? -1 : LayerIndex(spec.name)};
    shape.weight_bytes += t.bytes;
    shape.params_total += elements;
    if (t.layer >= 0) layer_params[t.layer] += elements;
    if (!out && (spec.role == checkpoint::TensorRole::kEmbedding || spec.role == checkpoint::TensorRole::kLinearWeight)) {
      const std::string module = spec.name.substr(0, spec.name.size() - std::string(".weight").size());
      shape.modules.push_back({module, spec.role == checkpoint::TensorRole::kEmbedding ? "Embedding" : "Linear", spec.shape});
    }
    shape.tensors.push_back(std::move(t));
  }
  for (const auto& [layer, params] : layer_params) {
    shape.max_layer_params = std::max(shape.max_layer_params, params);
    shape.layer_params_total += params;
  }
  return shape;
}

}  // namespace

ModelShape DeepseekModelShape(const checkpoint::DeepseekConfig& config, checkpoint::StDType dtype) {
  checkpoint::ModelConfig c = config.base;
  c.family = checkpoint::ArchFamily::kMoe;
  c.deepseek = std::make_shared<const checkpoint::DeepseekConfig>(config);  // its GGUF's layout (#37)
  c.num_experts = config.n_routed_experts;
  c.num_experts_per_tok = config.num_experts_per_tok;
  c.moe_intermediate_size = config.moe_intermediate_size;
  return ShapeOfTensors(std::move(c), checkpoint::DeepseekModelTensors(config), dtype,
                        [&config](const std::string& name) { return checkpoint::IsDeepseekMtpTensor(config, name); });
}

ModelShape Llama4ModelShape(const checkpoint::Llama4Config& config, checkpoint::StDType dtype) {
  checkpoint::ModelConfig c = config.base;
  c.family = checkpoint::ArchFamily::kMoe;
  c.num_experts = config.num_local_experts;
  c.num_experts_per_tok = config.num_experts_per_tok;
  c.moe_intermediate_size = config.base.intermediate_size;
  return ShapeOfTensors(std::move(c), checkpoint::Llama4ModelTensors(config), dtype,
                        [](const std::string&) { return false; });
}

}  // namespace quark::estimate
