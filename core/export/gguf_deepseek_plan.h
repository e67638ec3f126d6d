// The tensors of DeepSeek-V3's deepseek2 GGUF (gguf_deepseek.h) from the config alone, without weights or LibTorch:
// names, ggml shapes and types in file order. WriteDeepseekGguf lays its file out by the same rules and checks it
// against this plan; the estimator (core/estimate/artifact_size.cc) sizes the artifact by it, so they cannot disagree.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checkpoint/deepseek_config.h"
#include "core/export/gguf_file.h"
#include "core/export/gguf_mixture.h"

namespace quark::exporter::gguf {

/// INVALID_ARGUMENT naming the config field when deepseek2 cannot express `config`: YaRN's attention_factor other than
/// 1 (rope_scaling.mscale differing from mscale_all_dim, or an explicit attention_factor), rope_interleave false,
/// q_lora_rank null except with 26 or 27 layers (llama.cpp tells DeepSeek-V2-Lite's plain q_proj by its layer count)
/// or set with them.
absl::Status CheckDeepseekGguf(const checkpoint::DeepseekConfig& config);

/// The per-layer names: HF relative name -> llama.cpp's (the caller adds "blk.N."), in the file's order. kv_b_proj
/// (split into attn_k_b / attn_v_b) and the routed experts (stacked into ffn_*_exps) follow them.
const std::vector<std::pair<std::string, std::string>>& DeepseekLayerNames();

/// A tensor's type in a file of `asked` (kF32 or kQ8_0): Q8_0 where asked and its rows (ne[0]) are a multiple of 32,
/// F32 for 1-D tensors, the router (ffn_gate_inp) and shorter rows.
GgmlType DeepseekTensorType(const std::string& name, const std::vector<int64_t>& ne, GgmlType asked);

/// Every tensor of the deepseek2 GGUF of `config` in `type` (offsets unset), MTP layers left out.
/// INVALID_ARGUMENT for a type other than F32 / Q8_0.
absl::StatusOr<std::vector<TensorInfo>> PlanDeepseekGguf(const checkpoint::DeepseekConfig& config, GgmlType type);

}  // namespace quark::exporter::gguf
