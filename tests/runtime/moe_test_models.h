// Test models for the MoE architectures (#18): seeded random weights in HF's layout with routers wide enough that the
// top-k choice has clear margins, an optional edit of the tensors before writing (a skewed router), and an
// independent float64 forward written token by token (every router score, the sorted order, the top-k, each chosen
// expert computed on its own) to check the runtime against.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/status.h"
#include "core/checkpoint/model_config.h"

namespace quark::runtime::testing {

/// The "tiny" shape of `model_type` (mixtral, qwen2_moe, qwen3_moe) in float32.
checkpoint::ModelConfig TinyMoeConfig(const std::string& model_type);

/// Writes `config` to `dir` (config.json + model.safetensors, float32): linear and embedding weights N(0, 0.05^2),
/// biases N(0, 0.02^2), norm weights 1 + N(0, 0.1^2), routers N(0, 0.5^2); `edit` may change the tensors first.
absl::Status WriteMoeModel(const checkpoint::ModelConfig& config, const std::string& dir, uint64_t seed,
                           const std::function<void(std::map<std::string, at::Tensor>&)>& edit = {});

/// An `edit` for WriteMoeModel that makes every layer's router rank `expert` last for every token, with router
/// probabilities that still differ between tokens: the embeddings scaled by 4 with hidden dimension 0 set to 1 (so the
/// normed block input's dimension 0 is about 4 for every token, the others about 0.8; the routers have no bias), the
/// routers' column 0 is 0 except -3 for `expert` (its logit about -13 against the others' N(0, 3.4^2)).
/// MoeExpertRanking gives the order in which the top-up takes the other tokens.
std::function<void(std::map<std::string, at::Tensor>&)> StarveExpert(const checkpoint::ModelConfig& config,
                                                                     int64_t expert);

/// Logits [T, vocab] float64 of the MoE model in `model_dir` for `ids`.
at::Tensor MoeReferenceLogits(const std::string& model_dir, const std::vector<int64_t>& ids);

/// The top-up order of `expert` over tokens not routed to it, from router probabilities [T, E]: by the expert's rank
/// in each token's order (0 = its first choice), then by its probability (higher first). Returns token indices.
at::Tensor MoeExpertRanking(const at::Tensor& router_probs, int64_t expert);

/// The float64 input of layer `layer`'s MoE block (post_attention_layernorm's output, [T, hidden]) and its router
/// probabilities [T, E], for tests that need to know which tokens rank an expert highest.
void MoeReferenceRouting(const std::string& model_dir, const std::vector<int64_t>& ids, int64_t layer,
                         at::Tensor* block_input, at::Tensor* router_probs);

}  // namespace quark::runtime::testing
