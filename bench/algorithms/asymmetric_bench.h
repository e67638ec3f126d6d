// algo_bench gptaq|qronos: GPTAQ or Qronos (core/algorithms/asymmetric_gptq.h) on one seeded linear, timed. The same
// inputs go to AMD Quark's own classes through --save-inputs / --load-inputs (bench/algorithms/asymmetric_vs_quark.sh).
#pragma once

#include <cstdint>
#include <string>

namespace quark::bench {

struct AsymmetricFlags {
  std::string method = "gptaq";  // gptaq or qronos
  std::string random = "4096,4096,2048";  // N,K,T
  uint64_t seed = 0;
  double drift = 0.1;  // the quantized model's inputs: X + drift * a correlated perturbation
  int group_size = 128;
  bool act_order = true;
  int block_size = 128;
  int threads = 0;
  bool compare_gptq = false;
  /// The column-by-column loop instead of fused blocks (GptqOptions::fused_blocks = false): the old path, to compare.
  bool column_loop = false;
  /// cpu (default) or cuda:N: where the statistics and the quantization run (the tensor-op path on a GPU; timings
  /// wait for the device); the errors are computed on the host.
  std::string device = "cpu";
  /// Writes the seeded x, xq [T, K] and w [N, K] (float32, the flags in the metadata) to this file and exits.
  std::string save_inputs;
  /// Runs on x, xq and w from this file (as --save-inputs writes them) instead of seeded ones.
  std::string load_inputs;
  /// Also writes the quantized `weight` [N, K] and its `scale` / `zero_point` (float32 / int32) here: two builds'
  /// files compared byte for byte say whether a change moved any result bit.
  std::string save_weights;
};

/// Prints one JSON line: stats_s, quantize_s, total_s, peak_rss_mb, rel_output_error = |XW^T - X~Q^T|^2 / |XW^T|^2
/// (uint4 asymmetric per group), rtn's and, with compare_gptq, GPTQ's on X~ alone. X is the float model's input, X~
/// the quantized model's (x and xq in a --save-inputs file).
int RunAsymmetric(const AsymmetricFlags& f);

}  // namespace quark::bench
