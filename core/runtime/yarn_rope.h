// RoPE frequencies with optional YaRN scaling (HF's _compute_yarn_parameters / _compute_default_rope_parameters) and
// their rotate-half cos/sin tables: DeepSeek-V3's rope dimensions and gpt-oss's heads.
#pragma once

#include <cstdint>
#include <optional>

#include <ATen/ATen.h>

#include "core/checkpoint/yarn_config.h"

namespace quark::runtime {

/// HF's yarn_get_mscale: 1 for scale <= 1, else 0.1 * mscale * ln(scale) + 1.
double YarnMscale(double scale, double mscale);

/// The inverse frequencies [dim / 2] (float64) and the cos/sin multiplier (YaRN's attention_factor; 1 without it).
struct RopeFrequencies {
  at::Tensor inv_freq;
  double attention_factor = 1.0;
};
/// `dim` rotated dimensions (even), base `theta`; plain RoPE when `yarn` is nullopt.
RopeFrequencies YarnRopeFrequencies(const std::optional<checkpoint::YarnScaling>& yarn, int64_t dim, double theta);

/// cos and sin [T, dim] in `dtype` for positions 0..T-1 (computed in float64, the halves repeated as HF's
/// rotate-half tables, times attention_factor).
void YarnRopeTables(const RopeFrequencies& rope, int64_t seq_len, at::ScalarType dtype, at::Tensor* cos, at::Tensor* sin);

}  // namespace quark::runtime
