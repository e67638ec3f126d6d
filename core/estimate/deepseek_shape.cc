#include "core/estimate/deepseek_shape.h"

#include <memory>

#include "core/checkpoint/deepseek_layout.h"
#include "core/checkpoint/llama4_layout.h"
#include "core/estimate/shape_tensors.h"

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
  AddTensors(checkpoint::DeepseekModelTensors(config), dtype,
             [&config](const std::string& name) { return checkpoint::IsDeepseekMtpTensor(config, name); }, shape);
  return shape;
}

ModelShape Llama4ModelShape(const checkpoint::Llama4Config& config, checkpoint::StDType dtype) {
  ModelShape shape;
  shape.config = config.base;
  shape.config.family = checkpoint::ArchFamily::kMoe;
  shape.config.num_experts = config.num_local_experts;
  shape.config.num_experts_per_tok = config.num_experts_per_tok;
  shape.config.moe_intermediate_size = config.base.intermediate_size;
  shape.model_dtype = dtype;
  shape.num_layers = config.base.num_hidden_layers;
  AddTensors(checkpoint::Llama4ModelTensors(config), dtype, [](const std::string&) { return false; }, shape);
  return shape;
}

}  // namespace quark::estimate
