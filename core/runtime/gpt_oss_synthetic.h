// `quark make-model --arch gpt_oss`: the configs of the synthetic gpt-oss shapes.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checkpoint/gpt_oss_config.h"

namespace quark::runtime {

/// "tiny" (3 layers sliding / full / sliding with a window of 4, 6 query heads of 16 over 2 KV heads so q is wider
/// than hidden, 8 experts of width 32 with top-2, YaRN with truncate false over an original context of 64),
/// "gpt-oss-20b" and "gpt-oss-120b" (the released configs), "gpt-oss-20b-2l" and "gpt-oss-120b-2l" (their first two
/// layers, for speed and memory runs); empty for another arch.
std::vector<std::string> GptOssSyntheticShapes(const std::string& arch);

/// The config of a shape, torch_dtype set to `torch_dtype`. InvalidArgument listing the known shapes otherwise.
absl::StatusOr<checkpoint::GptOssConfig> GptOssSyntheticConfig(const std::string& shape, const std::string& torch_dtype);

}  // namespace quark::runtime
