#include "core/cli/config_options.h"

#include <CLI/CLI.hpp>

#include "core/base/status_macros.h"
#include "core/config/config_choice.h"
#include "core/config/config_json.h"
#include "core/base/strings.h"

namespace quark::cli {

void ConfigOptions::AddTo(CLI::App& command) {
  auto* scheme_option = command.add_option("--scheme", scheme, "a preset name (quark presets lists them)");
  auto* config_option =
      command.add_option("--config", config_file, "a Config file: proto JSON, Quark's quantization_config, or an "
                                                  "HF config.json holding one");
  scheme_option->excludes(config_option);
  command.add_option("--kv-cache-dtype", kv_cache_dtype, "quantize the KV cache: fp8 or int8");
  command.add_option("--exclude", exclude, "module name pattern to leave in floating point (repeatable)");
  command.add_option("--quant-algo", quant_algo, "algorithms to run, in order: gptq (comma-separated or repeated)");
  command.add_option("--quant-algo-config-file", quant_algo_config_file,
                     "Quark algo_config JSON (one {\"name\": ...} object or a list) for --quant-algo");
  command.add_option("--observer", observer,
                     "the weights' observer: imatrix_mse (importance-weighted MSE range search from calibration) or "
                     "min_max");
}

absl::StatusOr<Config> ConfigOptions::Resolve() const {
  ConfigChoice choice;
  choice.preset = scheme;
  choice.kv_cache_dtype = kv_cache_dtype;
  choice.exclude = exclude;
  QUARK_ASSIGN_OR_RETURN(choice.algorithms, AlgorithmsFromFlags(quant_algo, quant_algo_config_file));
  if (!config_file.empty()) {
    QUARK_ASSIGN_OR_RETURN(choice.config, LoadConfigFile(config_file));
  } else if (scheme.empty()) {
    return absl::InvalidArgumentError("--scheme or --config: one is required");
  }
  QUARK_ASSIGN_OR_RETURN(Config config, ResolveConfigChoice(choice));
  if (observer.empty()) return config;
  const std::optional<ObserverKind> kind = ParseObserverKind(observer);
  if (!kind || (*kind != ObserverKind::kImatrixMse && *kind != ObserverKind::kMinMax)) {
    return absl::InvalidArgumentError(StrCat("--observer: \"", observer, "\" is not imatrix_mse or min_max"));
  }
  // Every weight spec of the chosen Config; validation names the spec a weight observer cannot apply to.
  const auto set = [&](LayerQuantConfig& l) {
    if (l.weight) l.weight->observer = *kind;
  };
  set(config.global_quant_config);
  for (auto& [type, l] : config.layer_type_quant_config) set(l);
  for (auto& e : config.layer_quant_config) set(e.config);
  return config;
}

}  // namespace quark::cli
