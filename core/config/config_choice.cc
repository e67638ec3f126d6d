#include "core/config/config_choice.h"

#include <algorithm>

#include "core/base/status_macros.h"
#include "core/config/presets.h"

namespace quark {

absl::StatusOr<Config> ResolveConfigChoice(const ConfigChoice& choice) {
  if (!choice.preset.empty() && choice.config) {
    return absl::InvalidArgumentError("preset and config: give one of them, not both");
  }
  if (choice.preset.empty() && !choice.config) {
    return absl::InvalidArgumentError("preset: required (or a full config)");
  }
  Config config;
  if (choice.config) {
    config = *choice.config;
  } else {
    QUARK_ASSIGN_OR_RETURN(config, PresetConfig(choice.preset));
  }
  QUARK_RETURN_IF_ERROR(ApplyKvCacheDtype(choice.kv_cache_dtype, config));
  for (const auto& pattern : choice.exclude) {
    if (std::find(config.exclude.begin(), config.exclude.end(), pattern) == config.exclude.end()) {
      config.exclude.push_back(pattern);
    }
  }
  return config;
}

}  // namespace quark
