// YaRN `rope_scaling` (HF's _compute_yarn_parameters), shared by the families that use it: DeepSeek-V3 and gpt-oss.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace quark::checkpoint {

/// YaRN as config.json gives it: DeepSeek-V3 {"type": "yarn", factor 40, original_max_position_embeddings 4096,
/// beta_fast 32, beta_slow 1, mscale 1, mscale_all_dim 1}; gpt-oss {"rope_type": "yarn", factor 32, beta_fast 32,
/// beta_slow 1, truncate false, original_max_position_embeddings 4096}.
struct YarnScaling {
  double factor = 1.0;
  int64_t original_max_position_embeddings = 4096;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double mscale = 0.0;          // 0 = absent
  double mscale_all_dim = 0.0;  // 0 = absent
  double attention_factor = 0;  // 0 = absent (derived from mscale / mscale_all_dim)
  bool truncate = true;
};

/// The number `key` of `root` (called `field` in messages); `fallback` when absent or null. Errors name the field and
/// value when it is not a number.
absl::StatusOr<double> ReadNumberOr(const nlohmann::json& root, const std::string& label, const std::string& key,
                                    const std::string& field, double fallback);

/// `root`'s rope_scaling: nullopt when absent or null. Errors name the field and value: a type ("rope_type" or
/// "type") other than yarn (`model_type` named in the message), a non-positive factor or beta, negative mscales, an
/// original_max_position_embeddings outside (0, max_position_embeddings], a factor other than
/// max_position_embeddings / original_max_position_embeddings (HF reads the one for the frequencies, the other for
/// the attention factor), a non-boolean truncate.
absl::StatusOr<std::optional<YarnScaling>> ParseYarnScaling(const nlohmann::json& root, const std::string& label,
                                                           const std::string& model_type,
                                                           int64_t max_position_embeddings);

/// The rope_scaling object written for `yarn` under `type_key` ("type" for DeepSeek-V3, "rope_type" for gpt-oss).
nlohmann::json YarnScalingToJson(const YarnScaling& yarn, const std::string& type_key);

}  // namespace quark::checkpoint
