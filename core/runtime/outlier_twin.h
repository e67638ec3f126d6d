// An outlier twin of a small trained model: small models have no activation outliers, so what rotation, SmoothQuant,
// AWQ or an importance matrix gain on them looks tiny. The twin scales a few channels of every RMSNorm weight that
// feeds linears (input_layernorm -> q/k/v_proj, post_attention_layernorm -> gate/up_proj) by s in [min, max] and
// divides the same input columns of those linears by s: the float function is unchanged (up to the storage dtype's
// rounding), the activations the linears read get LLM-like outlier channels.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace quark::runtime {

struct OutlierTwinOptions {
  std::string model_dir;
  std::string out_dir;
  int64_t channels = 4;     // channels per norm
  double min_scale = 40;
  double max_scale = 100;
  uint64_t seed = 0;
};

/// Writes the twin of `model_dir` into `out_dir` (the weights re-written, every other file of the folder copied).
/// INVALID_ARGUMENT naming the field for bad options, or the model_type for a family whose norms are not a plain
/// RMSNorm weight read by the linears above (Gemma's 1 + w, OPT's LayerNorm bias, MoE experts); ALREADY_EXISTS when
/// `out_dir` exists.
absl::Status MakeOutlierTwin(const OutlierTwinOptions& options);

}  // namespace quark::runtime
