// `quark make-model --arch llama4`: the configs of the synthetic Llama 4 text shapes.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checkpoint/llama4_config.h"

namespace quark::runtime {

/// "tiny" (4 layers: a dense RoPE layer, then MoE layers of 4 experts, one of them NoPE; chunks of 8 tokens; Llama 3
/// rope scaling; floor_scale 4 so that temperature tuning acts within 16 tokens), "llama-4-scout" (Llama-4-Scout-17B-16E's
/// text config), "llama-4-scout-2l" (its first two layers, for speed and memory runs) and "llama-4-maverick"
/// (Llama-4-Maverick-17B-128E's: dense and MoE layers alternating, 128 experts, no QK norm) for arch "llama4" (or
/// "llama4_text"); empty for another arch.
std::vector<std::string> Llama4SyntheticShapes(const std::string& arch);

/// The config of a shape, torch_dtype set to `torch_dtype`. InvalidArgument listing the known shapes otherwise.
absl::StatusOr<checkpoint::Llama4Config> Llama4SyntheticConfig(const std::string& shape, const std::string& torch_dtype);

}  // namespace quark::runtime
