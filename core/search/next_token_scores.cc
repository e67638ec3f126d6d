#include "core/search/next_token_scores.h"

#include <ATen/core/grad_mode.h>  // at::NoGradGuard (LibTorch 2.11 no longer brings it with ATen.h)

#include "core/eval/streamed_forward.h"

namespace quark::search {
namespace {

absl::StatusOr<at::Tensor> NextTokenLogProbs(runtime::LayerStreamer& streamer, const at::Tensor& hidden) {
  auto logits = eval::LogitsOf(streamer, hidden);  // [1, T, vocab] float32
  if (!logits.ok()) return logits.status();
  const int64_t t = logits->size(1);
  return at::log_softmax(logits->select(0, 0).narrow(0, 0, t - 1), -1).cpu();
}

at::Tensor NextIds(const at::Tensor& sample) {
  return sample.reshape({-1}).narrow(0, 1, sample.numel() - 1).cpu().unsqueeze(1);  // [T - 1, 1]
}

}  // namespace

absl::StatusOr<NextTokenReference> NextTokenReference::Build(runtime::LayerStreamer& streamer,
                                                             const std::vector<at::Tensor>& samples,
                                                             const std::vector<at::Tensor>& finals) {
  at::NoGradGuard no_grad;
  NextTokenReference ref;
  ref.samples_ = samples;
  for (size_t s = 0; s < samples.size(); ++s) {
    auto lp = NextTokenLogProbs(streamer, finals[s]);
    if (!lp.ok()) return lp.status();
    const at::Tensor ids = NextIds(samples[s]);
    ref.nll_sum_ -= lp->gather(1, ids).to(at::kDouble).sum().item<double>();
    ref.tokens_ += ids.size(0);
    ref.log_probs_.push_back(*std::move(lp));
  }
  return ref;
}

absl::StatusOr<NextTokenReference::Loss> NextTokenReference::Score(runtime::LayerStreamer& streamer,
                                                                   const std::vector<at::Tensor>& finals) const {
  at::NoGradGuard no_grad;
  double kld = 0, nll = 0;
  for (size_t s = 0; s < samples_.size(); ++s) {
    auto lp = NextTokenLogProbs(streamer, finals[s]);
    if (!lp.ok()) return lp.status();
    const at::Tensor& r = log_probs_[s];
    kld += (r.exp() * (r - *lp)).to(at::kDouble).sum().item<double>();
    nll -= lp->gather(1, NextIds(samples_[s])).to(at::kDouble).sum().item<double>();
  }
  return Loss{kld / static_cast<double>(tokens_), (nll - nll_sum_) / static_cast<double>(tokens_)};
}

}  // namespace quark::search
