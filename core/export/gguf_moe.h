// Mixture-of-experts models (mixtral, qwen2_moe, qwen3_moe) in llama.cpp's GGUF form, as convert_hf_to_gguf.py
// writes them and llama.cpp (src/models/llama.cpp, qwen2moe.cpp, qwen3moe.cpp) reads them:
//  - HF keeps one [out, in] tensor per expert; GGUF stacks a layer's experts into one 3-D tensor per projection,
//    ne = {in, out, n_expert} (blk.N.ffn_gate_exps / ffn_up_exps / ffn_down_exps), expert e at byte e * slice;
//  - the router (block_sparse_moe.gate / mlp.gate) is blk.N.ffn_gate_inp, qwen2_moe's shared expert
//    blk.N.ffn_{gate,up,down}_shexp and its sigmoid gate blk.N.ffn_gate_inp_shexp; both gates stay F32 whatever the
//    file's type (the converter's and llama-quantize's rule);
//  - mixtral is architecture "llama" (Q/K rows permuted like Llama's), the qwen types "qwen2moe" / "qwen3moe" (NEOX
//    RoPE: no permutation; qwen3moe's per-head q/k norms are attn_q_norm / attn_k_norm).
// Routing: llama.cpp hard-codes the top-k renormalization per architecture (build_moe_ffn's norm_w; it reads no
// norm_topk_prob key): llama and qwen3moe renormalize, qwen2moe does not. A config asking for the other behaviour
// is refused naming norm_topk_prob, since llama.cpp would silently compute another model.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "core/checkpoint/model_config.h"
#include "core/export/gguf_file.h"

namespace quark::exporter::gguf {

/// Where an HF tensor lives in a GGUF: the GGUF tensor's name and, for one expert's weight, its index along the
/// stacked expert dimension (ne[2]); expert = -1 for a tensor of its own; name "" when llama.cpp has none for it.
struct GgufSlot {
  std::string name;
  int64_t expert = -1;
};

/// GgufTensorName's mapping plus the MoE tensors (router, experts, shared expert and its gate, q/k norms).
GgufSlot GgufTensorSlot(const std::string& hf_name);

/// The MoE tensors alone ({"", -1} for the others); GgufTensorName falls back to it.
GgufSlot MoeTensorSlot(const std::string& hf_name);

/// "llama" (mixtral), "qwen2moe" or "qwen3moe"; "" for a dense model_type. INVALID_ARGUMENT naming norm_topk_prob
/// when the config routes otherwise than llama.cpp's architecture does (see above).
absl::StatusOr<std::string> MoeGgufArchitecture(const checkpoint::ModelConfig& config);

/// <arch>.expert_count, expert_used_count, and for the qwen types expert_feed_forward_length (and qwen2moe's
/// expert_shared_feed_forward_length), as the converter writes them. Nothing for a dense config.
void AppendMoeMetadata(const checkpoint::ModelConfig& config, const std::string& arch, Metadata& md);

/// Whether `arch` is an architecture ModelConfigFromGguf reads through MoeConfigFromGguf.
bool IsMoeGgufArchitecture(const GgufFile& file, const std::string& arch);

/// The MoE fields of a GGUF (model_type, expert counts and widths, norm_topk_prob implied by the architecture,
/// qwen3moe's q/k norms) into `config`; INVALID_ARGUMENT naming a missing key.
absl::Status MoeConfigFromGguf(const GgufFile& file, const std::string& arch, checkpoint::ModelConfig& config);

/// Whether llama.cpp's `arch` requires output.weight even for tied embeddings (qwen2moe: the exporter then writes
/// the embedding as output.weight).
bool RequiresOutputTensor(const std::string& arch);

/// True for a tensor llama.cpp keeps in F32 whatever the file's type: ffn_gate_inp and ffn_gate_inp_shexp.
bool KeptInF32(const std::string& gguf_name);

}  // namespace quark::exporter::gguf
