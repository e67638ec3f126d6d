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
  std::vector<AlgoConfig> algorithms;  // appended to the Config's own algo_config (run in that order)
};

/// `--quant-algo` names (comma-separated lists allowed) and an optional `--quant-algo-config-file` (Quark's
/// algo_config form: one {"name": ...} object or a list of them), as Quark's LLM example takes them: each named
/// algorithm with the file's entry of that name, else its defaults; without names, the file's entries in order.
/// INVALID_ARGUMENT naming the flag for an unknown name or a bad file; UNIMPLEMENTED for a Quark algorithm this
/// engine does not have.
absl::StatusOr<std::vector<AlgoConfig>> AlgorithmsFromFlags(const std::vector<std::string>& names,
                                                            const std::string& config_file);

/// Exactly one of preset / config must be set (INVALID_ARGUMENT otherwise); an unknown preset is NOT_FOUND.
/// Does not validate the result: call ValidateConfig for that.
absl::StatusOr<Config> ResolveConfigChoice(const ConfigChoice& choice);

}  // namespace quark
