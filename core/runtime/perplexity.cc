#include "core/runtime/perplexity.h"

#include <algorithm>
#include <cmath>

#include "core/base/strings.h"

namespace quark::runtime {

std::vector<std::pair<int64_t, int64_t>> PerplexityWindows(int64_t num_tokens, int64_t seq_len, int64_t max_windows) {
  std::vector<std::pair<int64_t, int64_t>> windows;
  for (int64_t start = 0; start < num_tokens; start += seq_len) {
    const int64_t length = std::min(seq_len, num_tokens - start);
    if (length < 2) break;  // a single token predicts nothing
    windows.emplace_back(start, length);
    if (max_windows > 0 && static_cast<int64_t>(windows.size()) == max_windows) break;
  }
  return windows;
}

absl::StatusOr<PerplexityResult> EvaluatePerplexity(LayerStreamer& streamer, const std::vector<int64_t>& ids,
                                                    const PerplexityOptions& options) {
  const auto& config = streamer.config();
  if (options.seq_len < 0 || options.max_windows < 0) {
    return absl::InvalidArgumentError(StrCat("seq_len = ", options.seq_len, " and max_windows = ", options.max_windows,
                                             " must not be negative"));
  }
  if (ids.size() < 2) return absl::InvalidArgumentError(StrCat("perplexity needs at least 2 tokens, got ", ids.size()));
  // Past its trained context a model extrapolates (RoPE positions it never saw): a number, but not its perplexity.
  if (config.max_position_embeddings > 0 && options.seq_len > config.max_position_embeddings) {
    return absl::InvalidArgumentError(StrCat("seq_len: ", options.seq_len, " is above the model's max_position_embeddings (",
                                             config.max_position_embeddings, ")"));
  }
  PerplexityResult result;
  result.tokens = static_cast<int64_t>(ids.size());
  result.seq_len = options.seq_len > 0 ? options.seq_len : std::min<int64_t>(2048, config.max_position_embeddings);
  const auto windows = PerplexityWindows(result.tokens, result.seq_len, options.max_windows);
  const at::Tensor all_ids = at::tensor(ids, at::kLong);
  const int64_t bytes_per_token = config.hidden_size * static_cast<int64_t>(c10::elementSize(streamer.model().compute_dtype()));
  const int64_t tokens_per_pass = std::max<int64_t>(result.seq_len, options.activation_bytes_per_pass / bytes_per_token);
  size_t next = 0;
  while (next < windows.size()) {
    std::vector<at::Tensor> samples;
    int64_t pass_tokens = 0;
    while (next < windows.size() && (samples.empty() || pass_tokens + windows[next].second <= tokens_per_pass)) {
      samples.push_back(all_ids.narrow(0, windows[next].first, windows[next].second).unsqueeze(0));
      pass_tokens += windows[next].second;
      ++next;
    }
    auto hidden = streamer.Run(samples, options.hooks);
    if (!hidden.ok()) return hidden.status();
    for (size_t i = 0; i < samples.size(); ++i) {
      absl::StatusOr<at::Tensor> nll;
      try {
        nll = streamer.model().NextTokenNll((*hidden)[i], samples[i]);
      } catch (const std::exception& error) {
        return TorchErrorToStatus(error, "lm_head");
      }
      if (!nll.ok()) return nll.status();
      result.window_nll.push_back(nll->mean().item<double>());
    }
  }
  double sum = 0;
  for (double w : result.window_nll) sum += w;
  result.windows = static_cast<int64_t>(result.window_nll.size());
  result.mean_nll = sum / static_cast<double>(result.windows);
  result.ppl = std::exp(result.mean_nll);
  return result;
}

}  // namespace quark::runtime
