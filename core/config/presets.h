// Named quantization schemes: every scheme of Quark's LLM example, current and legacy names.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"

namespace quark {

struct Preset {
  std::string name;
  std::string description;  // one line
  bool legacy = false;      // an older Quark spelling of a scheme
  Config config;
};

/// Every preset, in display order. Each LLM preset excludes "lm_head".
const std::vector<Preset>& AllPresets();

/// The Config of a preset; NOT_FOUND naming the unknown name and listing close ones.
absl::StatusOr<Config> PresetConfig(std::string_view name);

/// KV-cache options: "fp8" (fp8_e4m3 per tensor static) or "int8" (int8 per tensor symmetric static) on the
/// outputs of k_proj and v_proj; "" leaves the config as is. INVALID_ARGUMENT for other names.
absl::Status ApplyKvCacheDtype(std::string_view kv_cache_dtype, Config& config);

/// Names of the KV-cache options, for help texts.
std::vector<std::string> KvCacheDtypes();

}  // namespace quark
