#include "core/estimate/deepseek_shape.h"

#include <algorithm>
#include <map>
#include <memory>

#include "core/checkpoint/deepseek_layout.h"

namespace quark::estimate {

ModelShape DeepseekModelShape(const checkpoint::DeepseekConfig& config, checkpoint::StDType dtype) {
  ModelShape shape;
  shape.config = config.base;
  shape.config.family = checkpoint::ArchFamily::kMoe;
  shape.config.deepseek = std::make_shared<const checkpoint::DeepseekConfig>(config);  // its GGUF's layout (#37)
  shape.config.num_experts = config.n_routed_experts;
  shape.config.num_experts_per_tok = config.num_experts_per_tok;
  shape.config.moe_intermediate_size = config.moe_intermediate_size;
  shape.model_dtype = dtype;
  shape.num_layers = config.base.num_hidden_layers;
  std::map<int64_t, int64_t> layer_params;
  for (const checkpoint::TensorSpec& spec : checkpoint::DeepseekModelTensors(config)) {
    int64_t elements = 1;
    for (int64_t d : spec.shape) elements *= d;
    const bool mtp = checkpoint::IsDeepseekMtpTensor(config, spec.name);
    TensorShape t{spec.name, dtype, spec.shape, static_cast<uint64_t>(elements) * checkpoint::StDTypeSize(dtype),
                  mtp ? -1 : LayerIndex(spec.name)};
    shape.weight_bytes += t.bytes;
    shape.params_total += elements;
    if (t.layer >= 0) layer_params[t.layer] += elements;
    if (!mtp && (spec.role == checkpoint::TensorRole::kEmbedding || spec.role == checkpoint::TensorRole::kLinearWeight)) {
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

}  // namespace quark::estimate
