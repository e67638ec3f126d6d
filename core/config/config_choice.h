// How a user names a Config (a preset, or a full Config) plus the options that apply on top of either:
// the shared resolution behind `quark quantize`, `quarkctl submit` and the server's SubmitJob.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"

namespace quark {

struct ConfigChoice {
  std::string preset;             // a preset name, or empty when `config` is given
  std::optional<Config> config;   // a full Config
  std::string kv_cache_dtype;     // "", "fp8" or "int8"
  std::vector<std::string> exclude;  // appended to the Config's own exclude list
};

/// Exactly one of preset / config must be set (INVALID_ARGUMENT otherwise); an unknown preset is NOT_FOUND.
/// Does not validate the result: call ValidateConfig for that.
absl::StatusOr<Config> ResolveConfigChoice(const ConfigChoice& choice);

}  // namespace quark
