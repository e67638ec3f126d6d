// Perplexity, the project's documented protocol:
//   ids = [BOS] + encode(whole text); non-overlapping windows of L tokens (default min(2048,
//   max_position_embeddings)), the last one shorter when the text does not fill it (kept when it has at least
//   2 tokens); PPL = exp(mean over windows of each window's mean next-token cross-entropy); optional cap on
//   the number of windows (the first N).
// Windows run through the LayerStreamer as samples, so a model of any size evaluates in about one layer of
// memory plus activations.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/runtime/layer_streamer.h"

namespace quark::runtime {

struct PerplexityOptions {
  /// Window length L; 0 = min(2048, max_position_embeddings).
  int64_t seq_len = 0;
  /// Evaluate only the first N windows; 0 = all.
  int64_t max_windows = 0;
  /// Hidden-state memory per pass (bytes); windows beyond it go in further passes (each pass streams every
  /// layer again).
  int64_t activation_bytes_per_pass = int64_t{256} << 20;
  /// Hooks run in every pass (e.g. a fake-quantizing quantizer).
  LayerHooks hooks;
};

struct PerplexityResult {
  int64_t tokens = 0;   // len(ids), BOS included
  int64_t windows = 0;  // windows evaluated
  int64_t seq_len = 0;  // L used
  double mean_nll = 0;  // mean over windows of each window's mean NLL (nats)
  double ppl = 0;       // exp(mean_nll)
  std::vector<double> window_nll;
};

/// The window starts and lengths the protocol evaluates for `num_tokens` tokens.
std::vector<std::pair<int64_t, int64_t>> PerplexityWindows(int64_t num_tokens, int64_t seq_len, int64_t max_windows);

/// Evaluates `ids` (BOS already prepended by the caller). InvalidArgument for fewer than 2 tokens, a negative
/// option, or L above max_position_embeddings of an OPT model; errors of the streamer pass through.
absl::StatusOr<PerplexityResult> EvaluatePerplexity(LayerStreamer& streamer, const std::vector<int64_t>& ids,
                                                    const PerplexityOptions& options = {});

}  // namespace quark::runtime
