// Test models for Gemma 2 / Gemma 3 (#18): seeded random weights with non-zero (1 + w) norm weights (so a norm read
// as w instead of 1 + w, or applied to the wrong tensor, shows), and the trained tinyllama-a fixture transplanted into
// the Gemma layout (so a perplexity comparison is not between two near-uniform distributions).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/checkpoint/model_config.h"

namespace quark::runtime::testing {

/// A tiny Gemma config: "gemma2" (4 layers, alternating windows) or "gemma3_text" (6 layers, layer 5 global,
/// rope_local_base_freq 10000 vs rope_theta 1e6 with linear scaling 8 when `rope_scaling`); hidden 64, 4 heads,
/// 2 KV heads, head_dim 16 (query_pre_attn_scalar 16), vocab 512, window `window`.
checkpoint::ModelConfig TinyGemmaConfig(const std::string& model_type, int64_t window, bool rope_scaling = false);

/// Writes `config` to `dir` (config.json + model.safetensors, float32): linear and embedding weights
/// N(0, weight_std^2), norm weights N(0, 0.2^2) (the norm multiplies by 1 + w), seeded with `seed`.
absl::Status WriteRandomGemmaModel(const checkpoint::ModelConfig& config, const std::string& dir, uint64_t seed,
                                   double weight_std = 0.05);

/// tinyllama-a (`llama_dir`: trained, hidden 256, 4 layers, 8 heads, 4 KV heads, head_dim 32, vocab 512) rewritten as
/// `model_type` "gemma2" (4 layers) or "gemma3_text" (6 layers: llama layer i % 4) in `dir` with sliding window
/// `window`. Tied embedding = llama's lm_head (Gemma ties; its embedding enters scaled by sqrt(hidden), which the first
/// norm undoes); input_layernorm / pre_feedforward_layernorm / model.norm = llama's norms - 1 (Gemma scales by 1 + w);
/// post-attention / post-feedforward norms and Gemma 3's q/k norms w = N(0, 0.05^2) seeded. Not the llama function
/// (Gemma normalizes each branch's output), but trained weights give peaked, text-dependent
/// predictions (mean NLL far from log(vocab), above it).
/// query_pre_attn_scalar = head_dim, soft-caps 50 / 30 (Gemma 2) and none (Gemma 3). tokenizer.model is copied.
absl::StatusOr<checkpoint::ModelConfig> TransplantTinyLlamaToGemma(const std::string& llama_dir,
                                                                   const std::string& model_type,
                                                                   const std::string& dir, int64_t window);

}  // namespace quark::runtime::testing
