// Mixture-of-experts models for the GGUF tests (mixtral, qwen2_moe, qwen3_moe), written as HF folders
// (config.json, model.safetensors, tokenizer.model) the exporter and the runtime read like any checkpoint.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "core/checkpoint/model_config.h"

namespace quark::testing {

/// The MoE config of `model_type` over the dense sizes of `dense` (attention, vocabulary, norms): `experts` experts
/// of width `expert_width`, top-2, llama.cpp's routing for that architecture (mixtral / qwen3_moe renormalize the
/// top-k weights, qwen2_moe does not), qwen2_moe's shared expert of width `expert_width` with q/k/v biases,
/// qwen3_moe's q/k norms. Through ParseModelConfig, so it is what LoadModelConfig reads back.
absl::StatusOr<checkpoint::ModelConfig> MoeConfigOver(const checkpoint::ModelConfig& dense,
                                                      const std::string& model_type, int64_t experts,
                                                      int64_t expert_width);

/// A small seeded `model_type` MoE (hidden 64, 2 layers, 4 heads / 2 KV heads, 4 experts of width 64, vocabulary
/// 512) with the tokenizer.model `tokenizer_model`, into `dir`; `tied`: lm_head tied to the embedding.
absl::Status WriteSmallMoeModel(const std::string& model_type, const std::string& dir,
                                const std::string& tokenizer_model, bool tied = false);

/// A `model_type` MoE grown from the trained dense Llama in `donor_dir` (tinyllama-a), so that llama.cpp and the
/// engine are compared on a model whose predictions mean something rather than near-uniform logits: attention,
/// norms, embeddings and head are the donor's; every expert (and qwen2_moe's shared expert) is the donor's MLP
/// plus seeded noise of 0.75 of each matrix's std, so the experts differ enough that which ones a token takes shows
/// in the NLL (swapping two experts moves it by 0.04-0.14; tinyllama-a's 1.72 becomes 2.0-3.0); the router is
/// N(0, 0.5), large
/// enough that routing is decisive and the chosen experts vary from token to token; qwen's extra tensors (q/k/v
/// biases, q/k norms, the shared expert's gate) are small seeded perturbations of the identity. 4 experts, top-2.
absl::Status WriteTransplantedMoeModel(const std::string& model_type, const std::string& donor_dir,
                                       const std::string& dir);

}  // namespace quark::testing
