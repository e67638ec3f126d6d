#include "core/checkpoint/config_fields.h"

#include "core/base/strings.h"
#include "core/checkpoint/config_limits.h"

namespace quark::checkpoint {

absl::Status ConfigFieldError(const std::string& label, const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(quark::StrCat(label, ": field \"", field, "\" ", what));
}

absl::Status ReadPositiveField(const nlohmann::json& root, const std::string& label, const std::string& field,
                               int64_t fallback, int64_t limit, int64_t* out) {
  auto it = root.find(field);
  if (it == root.end() || it->is_null()) {
    if (fallback <= 0) return ConfigFieldError(label, field, "is missing");
    *out = fallback;
    return absl::OkStatus();
  }
  if (!it->is_number_integer()) return ConfigFieldError(label, field, quark::StrCat("= ", it->dump(), " is not an integer"));
  const int64_t value = it->get<int64_t>();
  if (value <= 0) return ConfigFieldError(label, field, quark::StrCat("= ", value, " must be positive"));
  const int64_t max = limit > 0 ? limit : SizeLimitOf(field);
  if (max > 0 && value > max) {
    return ConfigFieldError(label, field, quark::StrCat("= ", value, " is above the limit ", max));
  }
  *out = value;
  return absl::OkStatus();
}

}  // namespace quark::checkpoint
