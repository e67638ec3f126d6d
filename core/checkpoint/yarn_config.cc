#include "core/checkpoint/yarn_config.h"

#include <cmath>

#include "core/base/strings.h"
#include "core/checkpoint/config_fields.h"
#include "core/checkpoint/config_limits.h"

namespace quark::checkpoint {

using nlohmann::json;

absl::StatusOr<double> ReadNumberOr(const json& root, const std::string& label, const std::string& key,
                                const std::string& field, double fallback) {
  auto it = root.find(key);
  if (it == root.end() || it->is_null()) return fallback;
  if (!it->is_number()) return ConfigFieldError(label, field, quark::StrCat("= ", it->dump(), " is not a number"));
  return it->get<double>();
}

absl::StatusOr<std::optional<YarnScaling>> ParseYarnScaling(const json& root, const std::string& label,
                                                           const std::string& model_type, int64_t max_position_embeddings) {
  auto it = root.find("rope_scaling");
  if (it == root.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) return ConfigFieldError(label, "rope_scaling", quark::StrCat("= ", it->dump(), " is not an object"));
  const json& s = *it;
  const auto type = s.find("rope_type") != s.end() ? s.find("rope_type") : s.find("type");
  if (type == s.end() || !type->is_string() || type->get<std::string>() != "yarn") {
    return ConfigFieldError(label, "rope_scaling.type", quark::StrCat("= ", type == s.end() ? "null" : type->dump(),
                      " is not supported for ", model_type, " (only \"yarn\")"));
  }
  YarnScaling y;
  const std::string p = "rope_scaling.";
  struct Number {
    const char* name;
    double* target;
    double fallback;
  };
  for (const Number& n : {Number{"factor", &y.factor, 0}, Number{"beta_fast", &y.beta_fast, 32},
                          Number{"beta_slow", &y.beta_slow, 1}, Number{"mscale", &y.mscale, 0},
                          Number{"mscale_all_dim", &y.mscale_all_dim, 0},
                          Number{"attention_factor", &y.attention_factor, 0}}) {
    auto value = ReadNumberOr(s, label, n.name, p + n.name, n.fallback);
    if (!value.ok()) return value.status();
    if (*value < 0) return ConfigFieldError(label, p + n.name, quark::StrCat("= ", *value, " must not be negative"));
    *n.target = *value;
  }
  if (y.factor <= 0) return ConfigFieldError(label, p + "factor", "must be a positive number");
  if (y.beta_fast <= 0 || y.beta_slow <= 0) {
    return ConfigFieldError(label, p + "beta_fast", quark::StrCat("= ", y.beta_fast, " and beta_slow = ", y.beta_slow,
                                                           " must be positive"));
  }
  if (auto status = ReadPositiveField(s, label, "original_max_position_embeddings", max_position_embeddings,
                             kMaxPositions, &y.original_max_position_embeddings);
      !status.ok()) {
    return ConfigFieldError(label, p + "original_max_position_embeddings", std::string(status.message()));
  }
  // HF's yarn takes the factor as max_position_embeddings / original_max_position_embeddings where the latter is
  // given, its attention scale rope_scaling.factor: a config where they differ is read two ways, so it is refused.
  const double ratio = static_cast<double>(max_position_embeddings) / y.original_max_position_embeddings;
  if (s.contains("original_max_position_embeddings") && std::abs(ratio - y.factor) > 1e-9 * y.factor) {
    return ConfigFieldError(label, p + "factor", quark::StrCat("= ", y.factor, " differs from max_position_embeddings / "
                      "rope_scaling.original_max_position_embeddings = ", ratio));
  }
  auto truncate = s.find("truncate");
  if (truncate != s.end() && !truncate->is_null()) {
    if (!truncate->is_boolean()) return ConfigFieldError(label, p + "truncate", quark::StrCat("= ", truncate->dump(), " is not a boolean"));
    y.truncate = truncate->get<bool>();
  }
  return y;
}

json YarnScalingToJson(const YarnScaling& y, const std::string& type_key) {
  json s = {{type_key, "yarn"}, {"factor", y.factor}, {"original_max_position_embeddings", y.original_max_position_embeddings},
            {"beta_fast", y.beta_fast}, {"beta_slow", y.beta_slow}};
  if (y.mscale > 0) s["mscale"] = y.mscale;
  if (y.mscale_all_dim > 0) s["mscale_all_dim"] = y.mscale_all_dim;
  if (y.attention_factor > 0) s["attention_factor"] = y.attention_factor;
  if (!y.truncate) s["truncate"] = false;
  return s;
}

}  // namespace quark::checkpoint
