// `quark make-model --arch deepseek_v3`: the configs of the synthetic DeepSeek-V3 shapes.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checkpoint/deepseek_config.h"

namespace quark::runtime {

/// "tiny" (3 layers, the first dense, 16 experts in 4 groups, YaRN with distinct mscale / mscale_all_dim, one MTP
/// layer), "tiny-q-proj" (q_lora_rank null, v_head_dim above the q/k head size, two shared experts, one of two groups
/// kept, no MTP layer), "deepseek-v3" (the released 671B config) and "deepseek-v3-4l" (its first four layers: three dense, one MoE
/// layer of 256 experts, for speed and memory runs); empty for another arch.
std::vector<std::string> DeepseekSyntheticShapes(const std::string& arch);

/// The config of a shape, torch_dtype set to `torch_dtype`. InvalidArgument listing the known shapes otherwise.
absl::StatusOr<checkpoint::DeepseekConfig> DeepseekSyntheticConfig(const std::string& shape, const std::string& torch_dtype);

}  // namespace quark::runtime
