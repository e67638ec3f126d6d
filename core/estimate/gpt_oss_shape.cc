#include "core/estimate/gpt_oss_shape.h"

#include <set>

#include "core/checkpoint/gpt_oss_layout.h"
#include "core/estimate/shape_tensors.h"

namespace quark::estimate {
namespace {

// The checkpoint's tensors with each layer's fused experts replaced by the per-expert linears (weight and bias) the
// engine splits them into and quantizes: what an export writes, and the same bytes as the fused tensors in float.
std::vector<checkpoint::TensorSpec> SplitExpertTensors(const checkpoint::GptOssConfig& config) {
  std::set<std::string> fused;
  for (int64_t i = 0; i < config.base.num_hidden_layers; ++i) {
    for (const checkpoint::TensorSpec& t : checkpoint::GptOssExpertTensors(config, i)) fused.insert(t.name);
  }
  const std::vector<checkpoint::LinearSpec> linears = checkpoint::GptOssLayerLinears(config);
  std::vector<checkpoint::TensorSpec> out;
  for (checkpoint::TensorSpec& spec : checkpoint::GptOssModelTensors(config)) {
    if (fused.count(spec.name) == 0) {
      out.push_back(std::move(spec));
      continue;
    }
    if (spec.name.size() < 12 || spec.name.compare(spec.name.size() - 12, 12, "gate_up_proj") != 0) continue;
    const std::string prefix = spec.name.substr(0, spec.name.size() - std::string("mlp.experts.gate_up_proj").size());
    for (const checkpoint::LinearSpec& l : linears) {
      if (!l.routed) continue;
      out.push_back({prefix + l.relative_name + ".weight", {l.out_features, l.in_features}, checkpoint::TensorRole::kLinearWeight});
      out.push_back({prefix + l.relative_name + ".bias", {l.out_features}, checkpoint::TensorRole::kLinearBias});
    }
  }
  return out;
}

}  // namespace

ModelShape GptOssModelShape(const checkpoint::GptOssConfig& config, checkpoint::StDType dtype) {
  const MoeFields moe{config.num_local_experts, config.num_experts_per_tok, config.base.intermediate_size};
  return MoeModelShape(config.base, moe, SplitExpertTensors(config), dtype);
}

}  // namespace quark::estimate
