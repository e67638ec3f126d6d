// `quark make-model --arch gemma2|gemma3_text`: the configs of the synthetic Gemma shapes.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checkpoint/model_config.h"

namespace quark::runtime {

/// The Gemma shapes of `arch` ("gemma2": tiny, gemma-2-9b; "gemma3_text": tiny, gemma-3-1b); empty for other arches.
std::vector<std::string> GemmaSyntheticShapes(const std::string& arch);

/// The config of a Gemma shape, torch_dtype set to `torch_dtype` ("float32", "bfloat16", "float16").
/// InvalidArgument listing the known shapes for an unknown one.
absl::StatusOr<checkpoint::ModelConfig> GemmaSyntheticConfig(const std::string& arch, const std::string& shape,
                                                             const std::string& torch_dtype);

}  // namespace quark::runtime
