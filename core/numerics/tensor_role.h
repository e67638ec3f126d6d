// What a quantized tensor is to its layer; decides the default axes of a QuantSpec.
#pragma once

#include <string_view>

namespace quark {

/// weight: per_channel defaults to axis 0 (output channel), per_group groups along the last axis (in_features).
/// activation: per_channel with is_dynamic is per token (one scale per row of the flattened [tokens, hidden]);
/// static per_channel activations are per hidden channel (default axis -1).
enum class TensorRole { kWeight, kActivation };

inline std::string_view Name(TensorRole role) { return role == TensorRole::kWeight ? "weight" : "activation"; }

}  // namespace quark
