// Automatic quantization under a budget, engine side: the sensitivity table (from the cache when its content key is
// there, else measured and stored), the search, and the verification of the chosen recipe by measurement (the model
// streamed with the recipe applied layer by layer, static activations calibrated on the quantized model's own
// inputs as the quantize pipeline does, scored against the float model on the same calibration samples). A loss
// budget that the measurement misses is refined (the worst group moves up) and measured again, up to max_rounds.
// Exporting the recipe is QuantizeModel's with RecipeConfig (the CLI does both).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "core/runtime/layer_streamer.h"
#include "core/search/budget_search.h"
#include "core/search/next_token_scores.h"
#include "core/search/sensitivity.h"

namespace quark::search {

struct AutoQuantizeOptions {
  std::vector<std::string> candidates;  // preset names
  Budget budget;
  std::string calibration_file;  // required: text, JSONL ("text") or token ids
  int64_t num_samples = 16;
  int64_t seq_len = 256;
  uint64_t seed = 42;
  std::string cache_dir;  // empty: no cache
  int max_rounds = 8;     // measurements of a loss budget, the first included
  SensitivityOptions sensitivity;
};

/// One measured recipe.
struct VerifiedRound {
  Recipe recipe;
  NextTokenReference::Loss measured;
  double seconds = 0;
};

struct AutoQuantizeResult {
  SensitivityTable table;
  bool table_from_cache = false;
  double sensitivity_seconds = 0;  // measuring or loading the table
  SearchSpace space;
  std::vector<VerifiedRound> rounds;  // the last is the answer
  bool met = false;                   // the last round's measurement meets the budget
  Config config;                      // the answer as a Quark Config
};

/// The calibration samples of `options` for the model in `model_dir` (its tokenizer unless token ids).
/// INVALID_ARGUMENT naming calibration_file when it is empty.
absl::StatusOr<std::vector<at::Tensor>> AutoCalibrationSamples(const std::string& model_dir,
                                                               const AutoQuantizeOptions& options);

/// The table for the model, samples and candidates: cached under its content key in options.cache_dir, else measured
/// on `streamer` (and stored there). `from_cache` (may be null) tells which.
absl::StatusOr<SensitivityTable> LoadOrMeasureSensitivity(const std::string& model_dir,
                                                          runtime::LayerStreamer& streamer,
                                                          const std::vector<at::Tensor>& samples,
                                                          const std::vector<Candidate>& candidates,
                                                          const AutoQuantizeOptions& options, bool* from_cache);

/// The model streamed with `config` applied layer by layer, scored against `reference` on its samples.
absl::StatusOr<NextTokenReference::Loss> MeasureRecipe(runtime::LayerStreamer& streamer,
                                                       const std::vector<at::Tensor>& samples, const Config& config,
                                                       const NextTokenReference& reference);

/// Candidates and budget errors name their fields (options.budget.field, "--candidates"); the search's refusals pass
/// through.
absl::StatusOr<AutoQuantizeResult> AutoQuantize(const std::string& model_dir, const AutoQuantizeOptions& options);

/// The result as JSON: the recipe (Quark config and the per-group plan), predicted vs measured loss per round, bits
/// per weight, the table's key and whether it came from the cache.
nlohmann::ordered_json AutoQuantizeJson(const AutoQuantizeResult& result);

}  // namespace quark::search
