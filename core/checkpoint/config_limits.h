// Upper bounds on the sizes a config.json states. A config.json is caller-controlled input (a tenant's model
// folder), and its sizes decide how much is allocated before any tensor is read: the module list holds one entry
// per layer (and per layer and expert), the sliding-window table one per layer. Each size is checked against a
// limit far above any released model before anything is sized by it, and the layer and expert counts against what
// the checkpoint's tensors can hold (CheckTensorCountBound), so a config.json claiming 2^31 layers is refused in
// microseconds instead of allocating until the OOM killer ends the process.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "core/checkpoint/model_config.h"

namespace quark::checkpoint {

/// Largest config.json read (released ones are a few KiB).
inline constexpr int64_t kMaxConfigJsonBytes = int64_t{4} << 20;
/// Released models: <= 128 layers, <= 512 experts, hidden <= 32 Ki, intermediate <= 128 Ki, vocab <= 256 Ki,
/// positions <= 10 Mi (Llama 4). Every limit is at least 8x that.
inline constexpr int64_t kMaxLayers = 4096;
inline constexpr int64_t kMaxExperts = 4096;
inline constexpr int64_t kMaxLayerExperts = int64_t{1} << 16;  // layers x experts (DeepSeek-V3: 61 x 256)
inline constexpr int64_t kMaxHiddenSize = int64_t{1} << 18;
inline constexpr int64_t kMaxIntermediateSize = int64_t{1} << 20;
inline constexpr int64_t kMaxHeads = int64_t{1} << 14;
inline constexpr int64_t kMaxHeadDim = int64_t{1} << 14;
inline constexpr int64_t kMaxVocabSize = int64_t{1} << 24;
inline constexpr int64_t kMaxPositions = int64_t{1} << 27;

/// The limit of a size field of config.json by its name ("num_hidden_layers", "num_local_experts", ...); 0 for a
/// field without one.
int64_t SizeLimitOf(const std::string& field);

/// INVALID_ARGUMENT "<label>: field "<field>" = <value> is above the limit <max>" when `value` exceeds the field's
/// limit (SizeLimitOf); OK for a field without one.
absl::Status CheckSizeLimit(const std::string& label, const std::string& field, int64_t value);

/// INVALID_ARGUMENT naming num_hidden_layers (or the experts field) when the checkpoint's `tensors_held` tensors
/// cannot hold the layers (at least one tensor each) or the experts (at least one tensor per layer and expert)
/// that `config` states. `location` names the checkpoint.
absl::Status CheckTensorCountBound(const ModelConfig& config, int64_t tensors_held, const std::string& location);

}  // namespace quark::checkpoint
