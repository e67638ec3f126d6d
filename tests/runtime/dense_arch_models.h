// Test models for Qwen3 and Phi-3 (#18): seeded random weights with non-trivial norms (so a norm applied to the
// wrong tensor shows), and transplants of the trained tinyllama-a fixture into their layouts (so a perplexity
// comparison is not between two near-uniform distributions).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "core/checkpoint/model_config.h"

namespace quark::runtime::testing {

/// Writes `config` to `dir` (config.json + model.safetensors, float32): linear and embedding weights
/// N(0, weight_std^2), biases N(0, 0.02^2), norm weights 1 + N(0, 0.1^2), from a generator seeded with `seed`.
absl::Status WriteRandomDenseModel(const checkpoint::ModelConfig& config, const std::string& dir, uint64_t seed,
                                   double weight_std = 0.05);

/// tinyllama-a (`llama_dir`: trained, hidden 256, 8 heads, 4 KV heads) rewritten as `model_type` "qwen3" or
/// "phi3" in `dir`, computing the same function up to Qwen3's q/k norms. Phi-3: q|k|v and gate|up concatenated
/// (exactly the Llama model). Qwen3: q_norm/k_norm weights r (1 + N(0, 0.05^2)) seeded, r the Llama heads' expected
/// RMS (one per layer and norm), so the model stays near the trained one while the norms (what is new) act. Eps and
/// RoPE as the source. tokenizer.model is copied. `repeat_kv_heads`: one KV head per query head (each a copy of
/// the KV head it read), which computes exactly the same function with square attention (Phi-3-mini's shape).
absl::Status TransplantTinyLlama(const std::string& llama_dir, const std::string& model_type, const std::string& dir,
                                 bool repeat_kv_heads = false);

}  // namespace quark::runtime::testing
