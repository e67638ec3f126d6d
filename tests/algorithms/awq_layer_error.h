// The held-out output error of decoder layer 0 after AWQ with given scaling pairs and round-to-nearest of every
// linear: how the scaling tests compare a template with and without one pair on the same samples.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

#include "core/algorithms/layer_scaling.h"
#include "core/algorithms/smoothing.h"
#include "core/config/quant_spec.h"
#include "core/runtime/transformer_model.h"

namespace quark::testing {

/// Sum over `held_out` of the squared difference between layer 0 after AWQ (`pairs`, searched on `calibration`)
/// with every linear fake-quantized by `spec`, and the float layer 0. Samples are embeddings [1, T, hidden].
double AwqLayerZeroHeldOutError(runtime::TransformerModel& model, const std::vector<ScalingLayer>& pairs,
                                const QuantSpec& spec, const std::vector<at::Tensor>& calibration,
                                const std::vector<at::Tensor>& held_out, const algorithms::HeadLayout& heads,
                                int64_t min_expert_tokens = algorithms::ScalingInputs{}.min_expert_tokens);

}  // namespace quark::testing
