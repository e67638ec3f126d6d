// algo_bench's MLP-block subcommands: awq and smoothquant on a saved Llama MLP block (mlp_block.h), and dump-mlp,
// which saves such a block from a model with the model's own hidden states.
#pragma once

#include <string>

namespace quark::bench {

struct MlpFlags {
  std::string input, out;
  int threads = 0;
  double eps = 1e-5;  // RMSNorm eps: Llama-2/3's and tinyllama-a's rms_norm_eps
  // awq
  int bits = 4;
  int group_size = 128;
  bool sym = false;  // default uint4 asymmetric with zero point (llm-awq and Quark)
  int grid = 20;
  bool time_clip = false;  // re-times the clip search alone (clip_s)
  bool clip_only = false;  // only the clip search, timed (no scale search, no errors)
  // smoothquant
  double alpha = 0.5;
  double scale_clamp_min = 1e-3;  // Quark's SmoothQuantConfig default (mit-han-lab/smoothquant clamps at 1e-5)
  std::string pairs = "both";     // both: Quark's Llama template; norm: post_attention_layernorm -> gate/up only
  // dump-mlp
  std::string model_dir, calib;
  int layer = 1;
  int samples = 16;
  int seq_len = 128;
  int seed = 42;
};

/// Each prints one JSON line on stdout; returns the process exit code (2 for bad flags or input).
int RunAwq(const MlpFlags& f);
int RunSmoothQuant(const MlpFlags& f);
int RunDumpMlp(const MlpFlags& f);

}  // namespace quark::bench
