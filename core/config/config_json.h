// Reading a Config from a file or string in any of its JSON forms.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"

namespace quark {

/// The proto JSON form of quark.v1.Config.
absl::StatusOr<std::string> ConfigToProtoJson(const Config& config);
absl::StatusOr<Config> ConfigFromProtoJson(std::string_view json);

/// Auto-detects the form: proto JSON (enum values like "DATA_TYPE_INT8"), Quark's quantization_config dict, or
/// a whole HF config.json holding one. Errors name the field path (and the byte offset of a JSON syntax error).
absl::StatusOr<Config> ConfigFromAnyJson(std::string_view json);
absl::StatusOr<Config> LoadConfigFile(const std::string& path);

}  // namespace quark
