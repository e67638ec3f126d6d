#include "core/estimate/gpt_oss_shape.h"

#include <memory>

#include "core/checkpoint/gpt_oss_layout.h"
#include "core/estimate/shape_tensors.h"

namespace quark::estimate {

// The checkpoint's tensors with each layer's fused experts replaced by the per-expert linears (weight and bias) the
// engine splits them into and quantizes: what an export writes, and the same bytes as the fused tensors in float.
ModelShape GptOssModelShape(const checkpoint::GptOssConfig& config, checkpoint::StDType dtype) {
  const MoeFields moe{config.num_local_experts, config.num_experts_per_tok, config.base.intermediate_size};
  checkpoint::ModelConfig base = config.base;
  base.gpt_oss = std::make_shared<const checkpoint::GptOssConfig>(config);  // its GGUF's layout (#32)
  return MoeModelShape(std::move(base), moe, checkpoint::GptOssSplitModelTensors(config), dtype);
}

}  // namespace quark::estimate
