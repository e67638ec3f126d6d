// Reading one optional field of a JSON object, shared by the readers of Quark's config dict (quark_json.cc and the
// per-algorithm readers beside it).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"

namespace quark {

/// `key` of `j` into `out` when present and not null (else `out` keeps its default); INVALID_ARGUMENT naming
/// `path.key` when the value is not true or false.
absl::Status ReadJsonBool(const nlohmann::ordered_json& j, const char* key, const std::string& path, bool& out);

}  // namespace quark
