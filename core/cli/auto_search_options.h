// `quark quantize --auto`: the options of the budgeted search and the run that turns them into the Config the
// quantize pipeline then applies (core/search/auto_quantize.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"
#include "core/search/auto_quantize.h"

namespace CLI {
class App;
}

namespace quark::cli {

struct AutoSearchOptions {
  bool enabled = false;
  std::string candidates;
  std::optional<double> target_bits;
  std::optional<double> max_kld;
  std::string cache_dir;
  std::string report;
  int max_rounds = 8;

  /// Registers --auto, --candidates, --target-bits, --max-kld, --sensitivity-cache, --auto-report, --max-rounds.
  void AddTo(CLI::App& command);
};

/// What the quantize command passes on besides the search options.
struct AutoSearchContext {
  std::string model;
  std::string calib;
  int64_t num_samples = 16;
  int64_t seq_len = 256;
  uint64_t seed = 42;
  std::optional<double> max_ppl_increase;  // the loss budget when given with --auto
  bool scheme_given = false;               // --scheme / --config: not with --auto
};

/// The engine's options from the CLI's: candidates (comma separated), calibration and cache; no budget yet.
search::AutoQuantizeOptions EngineSearchOptions(const std::string& candidates, const std::string& cache_dir,
                                                const AutoSearchContext& context);

/// Searches, verifies, prints the rounds on stdout and writes the report (--auto-report) when asked. The recipe's
/// Config, or INVALID_ARGUMENT naming the option (no budget or two, a scheme beside --auto, bad candidates, a budget
/// no candidate reaches), or FAILED_PRECONDITION when the last round's measurement still misses the budget.
absl::StatusOr<Config> RunAutoSearch(const AutoSearchOptions& options, const AutoSearchContext& context);

}  // namespace quark::cli
