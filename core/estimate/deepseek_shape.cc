#include "core/estimate/deepseek_shape.h"

#include <memory>
#include <utility>

#include "core/checkpoint/deepseek_layout.h"
#include "core/checkpoint/llama4_layout.h"
#include "core/estimate/shape_tensors.h"

namespace quark::estimate {

ModelShape DeepseekModelShape(const checkpoint::DeepseekConfig& config, checkpoint::StDType dtype) {
  checkpoint::ModelConfig base = config.base;
  base.deepseek = std::make_shared<const checkpoint::DeepseekConfig>(config);  // its GGUF's layout (#37)
  const MoeFields moe{config.n_routed_experts, config.num_experts_per_tok, config.moe_intermediate_size};
  return MoeModelShape(std::move(base), moe, checkpoint::DeepseekModelTensors(config), dtype,
                       [&config](const std::string& name) { return checkpoint::IsDeepseekMtpTensor(config, name); });
}

ModelShape Llama4ModelShape(const checkpoint::Llama4Config& config, checkpoint::StDType dtype) {
  const MoeFields moe{config.num_local_experts, config.num_experts_per_tok, config.base.intermediate_size};
  checkpoint::ModelConfig base = config.base;
  base.llama4 = std::make_shared<const checkpoint::Llama4Config>(config);  // its GGUF's layout (#32)
  return MoeModelShape(std::move(base), moe, checkpoint::Llama4ModelTensors(config), dtype);
}

}  // namespace quark::estimate
