#include "core/config/config_choice.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/config/mxfp8_tiles_as_mx.h"
#include "core/config/presets.h"
#include "core/config/quark_json.h"

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
    config = WithExportedMxfp8AsMx(*choice.config);  // #30: an HF-quark MXFP8 export's own config means mxfp8
  } else {
    QUARK_ASSIGN_OR_RETURN(config, PresetConfig(choice.preset));
  }
  QUARK_RETURN_IF_ERROR(ApplyKvCacheDtype(choice.kv_cache_dtype, config));
  for (const auto& pattern : choice.exclude) {
    if (std::find(config.exclude.begin(), config.exclude.end(), pattern) == config.exclude.end()) {
      config.exclude.push_back(pattern);
    }
  }
  config.algo_config.insert(config.algo_config.end(), choice.algorithms.begin(), choice.algorithms.end());
  return config;
}

namespace {

absl::StatusOr<std::vector<AlgoConfig>> ReadAlgoConfigFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(StrCat("--quant-algo-config-file: cannot read ", path));
  const auto j = nlohmann::ordered_json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(StrCat("--quant-algo-config-file: ", path, " is not JSON"));
  std::vector<AlgoConfig> out;
  const bool list = j.is_array();
  for (size_t i = 0; i < (list ? j.size() : 1); ++i) {
    const std::string field = list ? StrCat("--quant-algo-config-file[", i, "]") : "--quant-algo-config-file";
    QUARK_ASSIGN_OR_RETURN(AlgoConfig algo, AlgoConfigFromQuarkJson(list ? j[i] : j, field));
    out.push_back(std::move(algo));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<AlgoConfig>> AlgorithmsFromFlags(const std::vector<std::string>& names,
                                                            const std::string& config_file) {
  std::vector<AlgoConfig> from_file;
  if (!config_file.empty()) {
    QUARK_ASSIGN_OR_RETURN(from_file, ReadAlgoConfigFile(config_file));
  }
  std::vector<std::string> wanted;
  for (const std::string& list : names) {
    std::stringstream items(list);
    for (std::string name; std::getline(items, name, ',');) {
      if (!name.empty()) wanted.push_back(name);
    }
  }
  if (wanted.empty()) return from_file;
  std::vector<AlgoConfig> out;
  for (size_t i = 0; i < wanted.size(); ++i) {
    // Quark's example spells SmoothQuant "smoothquant"; its algo_config says "smooth".
    const std::string name = wanted[i] == "smoothquant" ? "smooth" : wanted[i];
    auto in_file = std::find_if(from_file.begin(), from_file.end(),
                                [&](const AlgoConfig& a) { return AlgoName(a) == name; });
    if (in_file != from_file.end()) {
      out.push_back(*in_file);
      continue;
    }
    nlohmann::ordered_json defaults = {{"name", name}};
    QUARK_ASSIGN_OR_RETURN(AlgoConfig algo, AlgoConfigFromQuarkJson(defaults, StrCat("--quant-algo[", i, "]")));
    out.push_back(std::move(algo));
  }
  return out;
}

}  // namespace quark
