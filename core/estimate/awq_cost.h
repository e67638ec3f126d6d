// What AWQ costs beyond the calibration forward (core/algorithms/smoothing.cc, awq_clip.cc), from shapes alone (no
// LibTorch: quarkd's estimator).
//
// The ratio grid: each scaling pair's inspected module runs once for the reference output and once per ratio with the
// pair's trial weights (its linears scaled, fake-quantized and scaled back). With the default pairs
// (quantize/scaling_pass.cc DefaultScalingLayers) the attention is inspected for q/k/v (its projections and its
// scores), o alone, the MLP (an MoE block) for gate/up, down alone: per ratio every linear runs for its own pair, and
// the attention's output projection and the MLP's (each expert's) down projection once more inside a block inspected
// for another pair. Charging each linear once per ratio, as the phase did, left a Llama-2-7B-shaped layer's grid 1.4x
// low.
//
// The clip search: for every linear it clips, per block of output channels, the float outputs of each group of input
// columns over the sampled tokens, then for each shrink factor the clamped weight's fake quantization, its per-group
// outputs and their squared error against the float ones. Held against a Llama-2-7B-shaped layer at 2,048 tokens on a
// 2-core Zen 5 VM (docs/results/estimates.md, "AWQ's clip search charged"): the products ran at the probe's GEMM
// rate, the clamps and quantizations of the trial weights at the fake-quant rate's order, and the error, computed in
// the memory the products have just written, took 3 of the search's 52 s: it is not charged.
#pragma once

#include <cstdint>
#include <string>

#include "core/estimate/throughput.h"

namespace quark::estimate {

/// A ratio grid's work: GEMM FLOPs of the inspected modules' forwards, float32 bytes of trial weights.
struct AwqGridWork {
  double forward_flops = 0;
  double trial_weight_bytes = 0;

  AwqGridWork& operator+=(const AwqGridWork& other);
};

/// Whether the default pairs run the decoder linear `name` (relative to its layer: "self_attn.o_proj") a second time
/// per ratio, inside a block they inspect for another pair: an attention's output projection (o_proj, out_proj) and
/// an MLP's or an expert's down projection (down_proj, Mixtral's w2). OPT's fc2 is not: its fc1 is inspected alone.
bool AwqRunsInsideAnInspectedBlock(const std::string& name);

/// One decoder linear's share of a `grid`-ratio search: `active_weights` (out x in, a routed expert's at its share of
/// the tokens) times `tokens` in the reference and each ratio's forward (twice where AwqRunsInsideAnInspectedBlock),
/// and its out x in trial weight once per ratio.
AwqGridWork AwqGridLinearWork(const std::string& name, int64_t out, int64_t in, double active_weights, int64_t tokens,
                              int grid);

/// The attention scores (Q K^T and P V) of one layer's inspected attention over `samples` of `seq` tokens: the
/// reference and `grid` ratios, 4 seq^2 hidden FLOPs a sample each, as the calibration forward charges them.
AwqGridWork AwqGridAttentionWork(int64_t hidden, int64_t seq, int64_t samples, int grid);

/// The seconds of `work` at `rates`: its forwards at the GEMM rate, its trial weights at the fake-quant rate.
double AwqGridSeconds(const AwqGridWork& work, const Throughput& rates);

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
