// The Config-choosing options shared by `quark validate` and `quark quantize`:
// --scheme NAME | --config FILE, --kv-cache-dtype, --exclude (repeatable), --quant-algo NAMES and
// --quant-algo-config-file FILE (Quark's algo_config form, as its LLM example takes them), --observer NAME (the
// weights' observer).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"

namespace CLI {
class App;
}

namespace quark::cli {

struct ConfigOptions {
  std::string scheme;
  std::string config_file;
  std::string kv_cache_dtype;
  std::vector<std::string> exclude;
  std::vector<std::string> quant_algo;
  std::string quant_algo_config_file;
  std::string observer;  // #35: --observer NAME for every weight spec (imatrix_mse, min_max)

  /// Registers the options on a subcommand.
  void AddTo(CLI::App& command);
  /// The chosen Config (not yet validated); errors name the option.
  absl::StatusOr<Config> Resolve() const;
};

}  // namespace quark::cli
