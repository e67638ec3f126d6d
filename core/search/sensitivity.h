// Per-group sensitivity: for each linear group of each decoder layer (q/k/v, o, gate/up, down) and each candidate
// scheme, how much the model's predictions move when only that group is quantized with that scheme — the mean
// KL divergence from the float model's next-token distribution, and the mean NLL increase, over the calibration
// samples. One streamed pass per candidate: the streamer runs the float model layer by layer; at layer j, with j's
// weights loaded once, every group of j is quantized in turn (static activations calibrated on the float inputs of
// j), applied to those float inputs and put back, which starts one branch per group; branches started at earlier
// layers continue through j in float. After the last layer every branch's logits are compared with the float ones.
//
// Memory: one hidden state per branch (groups x samples x T x hidden x 4 bytes, bounded by max_branch_bytes) plus
// the float log-probs (samples x T x vocab x 4 bytes), beside one layer's weights.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/runtime/layer_streamer.h"
#include "core/search/recipe_space.h"
#include "core/search/sensitivity_table.h"

namespace quark::search {

struct SensitivityOptions {
  /// Bytes the branches' hidden states may take in one pass; past it RESOURCE_EXHAUSTED names the layer.
  int64_t max_branch_bytes = int64_t{4} << 30;
  /// #36 item 4, a pass split by layer range: branches start only at decoder layers [first_layer, first_layer +
  /// layer_count) (layer_count 0 = every layer). The float stream still runs the whole model, so each branch is
  /// computed exactly as in the whole pass and the table holds the whole pass's figures for those layers' groups.
  int64_t first_layer = 0;
  int64_t layer_count = 0;
};

/// `samples`: token ids [1, T] int64 each (T >= 2). Errors: INVALID_ARGUMENT for no samples or a sample shorter
/// than 2 tokens, a layer range outside the model's layers (naming first_layer / layer_count), candidate errors of
/// the quantizer naming the group, RESOURCE_EXHAUSTED past max_branch_bytes,
/// streamer errors as they are.
absl::StatusOr<SensitivityTable> MeasureSensitivity(runtime::LayerStreamer& streamer,
                                                    const std::vector<at::Tensor>& samples,
                                                    const std::vector<Candidate>& candidates,
                                                    const SensitivityOptions& options = {});

}  // namespace quark::search
