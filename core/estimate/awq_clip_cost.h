// What AWQ's clip search costs (core/algorithms/awq_clip.cc): for every linear it clips, per block of output channels,
// the float outputs of each group of input columns over the sampled tokens, then for each shrink factor the clamped
// weight's fake quantization, its per-group outputs and their squared error against the float ones. From shapes alone
// (no LibTorch: quarkd's estimator). Held against a Llama-2-7B-shaped layer at 2,048 tokens on a 2-core Zen 5 VM
// (docs/results/estimates.md, "AWQ's clip search charged"): the products ran at the probe's GEMM rate, the clamps and
// quantizations of the trial weights at 0.22 GB/s where the probe's fake-quant rate read 0.11-0.15 (it charges them
// high, as it does the ratio grid's), and the error, computed in the memory the products have just written, took 3 of
// the search's 52 s: it is not charged.
#pragma once

#include <cstdint>
#include <string>

#include "core/estimate/throughput.h"

namespace quark::estimate {

struct ClipSearchWork {
  /// The per-group products: the float outputs and each shrink factor's, (shrinks + 1) x 2 S in out for S sampled
  /// tokens (batched products of [S, group] x [group, rows]).
  double product_flops = 0;
  /// Each shrink factor's clamped weight through the fake quantization, float32: shrinks x out x in x 4.
  double trial_weight_bytes = 0;

  ClipSearchWork& operator+=(const ClipSearchWork& other);
};

/// The clip search's work for the linear `name` [out, in] whose recorded input has `tokens` tokens: nothing for a
/// linear the search leaves alone (checkpoint::AwqClipsLinear) or an empty one. (The groups only shape the products.)
ClipSearchWork AwqClipSearchWork(const std::string& name, int64_t out, int64_t in, int64_t tokens);

/// The seconds of `work` at `rates`: its products at the GEMM rate, its trial weights at the fake-quant rate.
double AwqClipSearchSeconds(const ClipSearchWork& work, const Throughput& rates);

}  // namespace quark::estimate
