// The Mixture-of-Experts part of an HF config.json (mixtral, qwen2_moe, qwen3_moe): expert counts, top-k, the
// renormalization of the top-k weights, the shared expert. Kept apart from model_config.cc so the dense families'
// parser only dispatches here.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "core/checkpoint/model_config.h"

namespace quark::checkpoint {

/// Whether `model_type` is one of the MoE types this runtime builds (mixtral, qwen2_moe, qwen3_moe).
bool IsMoeModelType(const std::string& model_type);

/// Reads the MoE fields of `root` into `config` (family, sizes and attention fields already parsed): the expert
/// count (mixtral: num_local_experts; qwen: num_experts), num_experts_per_tok, the expert width (mixtral:
/// intermediate_size; qwen: moe_intermediate_size), norm_topk_prob (mixtral always renormalizes), qwen2_moe's
/// shared_expert_intermediate_size, and the attention details (qwen2_moe: q/k/v bias; qwen3_moe: q_norm/k_norm,
/// attention_bias; mixtral: sliding_window). Refuses, naming the field, what the runtime does not build: dense MLP
/// layers between sparse ones (decoder_sparse_step != 1, a non-empty mlp_only_layers), a sliding window on the qwen
/// MoE types, top-k outside [1, experts].
absl::Status ParseMoeFields(const nlohmann::json& root, const std::string& label, ModelConfig& config);

/// Writes the MoE fields of `config` under their HF names (architectures included) into `root`.
void WriteMoeFields(const ModelConfig& config, nlohmann::json& root);

}  // namespace quark::checkpoint
