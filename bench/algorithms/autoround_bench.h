// algo_bench autoround: the engine's AutoRound on one decoder layer of a model, with the layer and its calibration
// data saved for auto-round's own code (bench/algorithms/peers/autoround_peer.py, autoround_vs_peer.sh).
#pragma once

#include <string>

namespace quark::bench {

struct AutoRoundBenchFlags {
  std::string model_dir, calib, save_dir;
  int layer = 0;
  int samples = 8;   // training windows
  int heldout = 8;   // held-out windows (the output error), disjoint from the training ones
  int seq_len = 128;
  int seed = 42;     // windows and the sampler
  /// The sampler alone (the order the windows are drawn and summed in), the windows kept: -1 takes `seed`. Two values
  /// give two runs of the same problem whose gradient sums round differently (the engine's own run-to-run spread).
  int order_seed = -1;
  int iters = 200;
  int batch = 8;
  int group_size = 128;
  int threads = 0;
};

/// Saves (into save_dir) layer.safetensors: the layer's float weights by their names in the layer
/// ("self_attn.q_proj.weight", ...), train_inputs / heldout_inputs [S, T, H] (the layer's inputs on the windows) and
/// train_targets / heldout_targets (the float layer's outputs); then runs AutoRoundQuantizeLayer (uint4 asymmetric,
/// groups of group_size, auto-round's defaults otherwise) on the training windows and writes engine_weights.safetensors
/// (the rounded weights) and engine.json (one JSON line, also printed: losses per iteration, first / best loss, best
/// iteration, held-out error of the rounded layer and of round to nearest, changed roundings, seconds).
int RunAutoRoundBench(const AutoRoundBenchFlags& f);

}  // namespace quark::bench
