// The float model's next-token log-probs on a set of samples, and the mean KLD / NLL increase of other final hidden
// states against them: the loss both the sensitivity pass and the recipe's verification report.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/runtime/layer_streamer.h"

namespace quark::search {

/// Position t of a sample predicts token t + 1: T - 1 scored positions per sample.
class NextTokenReference {
 public:
  /// `finals`: the float model's final hidden states ([1, T, hidden] per sample) on `samples` ([1, T] ids).
  static absl::StatusOr<NextTokenReference> Build(runtime::LayerStreamer& streamer,
                                                  const std::vector<at::Tensor>& samples,
                                                  const std::vector<at::Tensor>& finals);

  struct Loss {
    double kld = 0;           // mean KLD(float || other) per scored token, nats
    double nll_increase = 0;  // mean NLL(other) - mean NLL(float), nats per token
  };
  /// `finals` of another model (same samples, same head).
  absl::StatusOr<Loss> Score(runtime::LayerStreamer& streamer, const std::vector<at::Tensor>& finals) const;

  double mean_nll() const { return nll_sum_ / static_cast<double>(tokens_); }
  int64_t tokens() const { return tokens_; }

 private:
  std::vector<at::Tensor> samples_;
  std::vector<at::Tensor> log_probs_;  // per sample [T - 1, vocab] float32
  double nll_sum_ = 0;
  int64_t tokens_ = 0;
};

}  // namespace quark::search
