#include "core/eval/streamed_forward.h"

#include <algorithm>

namespace quark::eval {

absl::Status ForEachHidden(runtime::LayerStreamer& streamer, const std::vector<at::Tensor>& samples,
                           const runtime::LayerHooks& hooks, int64_t activation_bytes_per_pass,
                           const std::function<absl::Status(size_t index, const at::Tensor& hidden)>& on_hidden) {
  const int64_t bytes_per_token = streamer.config().hidden_size *
                                  static_cast<int64_t>(c10::elementSize(streamer.model().compute_dtype()));
  const int64_t budget_tokens = std::max<int64_t>(1, activation_bytes_per_pass / std::max<int64_t>(1, bytes_per_token));
  size_t next = 0;
  while (next < samples.size()) {
    const size_t first = next;
    int64_t tokens = 0;
    std::vector<at::Tensor> pass;
    while (next < samples.size() && (pass.empty() || tokens + samples[next].size(-1) <= budget_tokens)) {
      tokens += samples[next].size(-1);
      pass.push_back(samples[next++]);
    }
    auto hidden = streamer.Run(pass, hooks);
    if (!hidden.ok()) return hidden.status();
    for (size_t i = 0; i < pass.size(); ++i) {
      absl::Status status = on_hidden(first + i, (*hidden)[i]);
      if (!status.ok()) return status;
      (*hidden)[i] = at::Tensor();  // release as soon as used
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<at::Tensor> LogitsOf(runtime::LayerStreamer& streamer, const at::Tensor& hidden) {
  try {
    auto logits = streamer.model().Logits(hidden);
    if (!logits.ok()) return logits.status();
    return logits->to(at::kFloat).contiguous();
  } catch (const std::exception& error) {
    return runtime::TorchErrorToStatus(error, "lm_head");
  }
}

}  // namespace quark::eval
