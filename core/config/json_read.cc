#include "core/config/json_read.h"

#include "core/base/strings.h"

namespace quark {

absl::Status ReadJsonBool(const nlohmann::ordered_json& j, const char* key, const std::string& path, bool& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_boolean()) {
    return absl::InvalidArgumentError(StrCat(path, ".", key, ": expected true or false, got ", it->dump()));
  }
  out = it->get<bool>();
  return absl::OkStatus();
}

}  // namespace quark
