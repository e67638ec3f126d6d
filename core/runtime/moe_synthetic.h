// `quark make-model --arch mixtral|qwen2_moe|qwen3_moe`: the configs of the synthetic MoE shapes.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checkpoint/model_config.h"

namespace quark::runtime {

/// The MoE shapes of `arch` ("mixtral": tiny, mixtral-8x7b; "qwen2_moe": tiny, qwen1.5-moe-a2.7b; "qwen3_moe": tiny,
/// qwen3-30b-a3b); empty for other arches.
std::vector<std::string> MoeSyntheticShapes(const std::string& arch);

/// The config of an MoE shape, torch_dtype set to `torch_dtype` ("float32", "bfloat16", "float16").
/// InvalidArgument listing the known shapes for an unknown one.
absl::StatusOr<checkpoint::ModelConfig> MoeSyntheticConfig(const std::string& arch, const std::string& shape,
                                                           const std::string& torch_dtype);

}  // namespace quark::runtime
