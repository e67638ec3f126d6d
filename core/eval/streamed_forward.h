// Runs samples through a LayerStreamer in passes bounded by their hidden-state memory and hands each sample's final
// hidden state to a callback, in order; the pass's hidden states are released before the next pass starts.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/status.h"
#include "core/runtime/layer_streamer.h"

namespace quark::eval {

/// samples: token ids [1, T] int64 each. `on_hidden(index, hidden [1, T, hidden])` may return an error, which stops
/// the run and is returned. Errors of the streamer pass through.
absl::Status ForEachHidden(runtime::LayerStreamer& streamer, const std::vector<at::Tensor>& samples,
                           const runtime::LayerHooks& hooks, int64_t activation_bytes_per_pass,
                           const std::function<absl::Status(size_t index, const at::Tensor& hidden)>& on_hidden);

/// A LibTorch call that may throw, as a Status naming `what`.
absl::StatusOr<at::Tensor> LogitsOf(runtime::LayerStreamer& streamer, const at::Tensor& hidden);

}  // namespace quark::eval
