// Reading config.json fields with errors that name them: shared by the family parsers (moe_config, deepseek_config).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"

namespace quark::checkpoint {

/// INVALID_ARGUMENT "<label>: field "<field>" <what>".
absl::Status ConfigFieldError(const std::string& label, const std::string& field, const std::string& what);

/// The positive integer `field` of `root` into *out; `fallback` when absent or null (0 = required: "is missing").
/// Errors name the field and value: not an integer, not positive, above `limit` (0 = the field's SizeLimitOf).
absl::Status ReadPositiveField(const nlohmann::json& root, const std::string& label, const std::string& field,
                               int64_t fallback, int64_t limit, int64_t* out);

}  // namespace quark::checkpoint
