// What names an HF model takes in llama.cpp's GGUF form: the architecture, every tensor's name (convert_hf_to_gguf.py's
// tensor map) and which Q/K rows the converter permutes. No LibTorch: the GGUF writer and the estimator's artifact
// sizes (core/estimate) share it.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "core/checkpoint/model_config.h"

namespace quark::exporter::gguf {

/// "llama" (model_type llama, mistral) or "qwen2"; INVALID_ARGUMENT naming model_type for others (OPT), and for
/// rope_scaling llama3 (llama.cpp needs a rope_freqs tensor this exporter does not write). The MoE types: "llama"
/// (mixtral), "qwen2moe", "qwen3moe", with their own refusals (gguf_moe.h).
absl::StatusOr<std::string> GgufArchitecture(const checkpoint::ModelConfig& config);

/// llama.cpp's name of an HF tensor ("model.layers.3.self_attn.q_proj.weight" -> "blk.3.attn_q.weight"; an MoE
/// expert's weight -> the stacked tensor holding it, GgufTensorSlot also gives the expert); "" for a
/// tensor llama.cpp has no name for.
std::string GgufTensorName(const std::string& hf_name);
/// The inverse; "" for an unknown name.
std::string HfTensorName(const std::string& gguf_name);

/// The heads whose rows `hf_name` permutes (q_proj: attention heads, k_proj: KV heads; weight and bias), or 0 when
/// it keeps its order (every other tensor, and every tensor of qwen2).
int64_t PermutedHeads(const checkpoint::ModelConfig& config, const std::string& hf_name);

}  // namespace quark::exporter::gguf
