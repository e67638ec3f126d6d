// Qwen3 and Phi-3 in llama.cpp's GGUF form, as convert_hf_to_gguf.py writes them and llama.cpp (src/models/qwen3.cpp,
// phi3.cpp) reads them:
//  - qwen3: architecture "qwen3", NEOX RoPE (no Q/K row permutation), the per-head norms self_attn.q_norm / k_norm as
//    blk.N.attn_q_norm / attn_k_norm; attention.key_length carries head_dim (which may differ from hidden / heads);
//  - phi3: architecture "phi3", NEOX RoPE, self_attn.qkv_proj as blk.N.attn_qkv and mlp.gate_up_proj as blk.N.ffn_up
//    unchanged (llama.cpp's LLM_FFN_SWIGLU takes the first half of ffn_up's output as the gate, HF's chunk order);
//    rope.scaling.original_context_length and attention.sliding_window as the converter writes them (llama.cpp
//    currently ignores Phi-3's window: at most max_position_embeddings tokens, which HF's window of 2047 only
//    matters past).
#pragma once

#include <string>

#include "core/checkpoint/model_config.h"
#include "core/export/gguf_file.h"

namespace quark::exporter::gguf {

/// "qwen3" or "phi3" for those model types; "" otherwise.
std::string DenseGgufArchitecture(const checkpoint::ModelConfig& config);

/// llama.cpp's name of a Qwen3 / Phi-3 module of a decoder layer ("self_attn.qkv_proj" -> "attn_qkv",
/// "mlp.gate_up_proj" -> "ffn_up", "self_attn.q_norm" -> "attn_q_norm", "self_attn.k_norm" -> "attn_k_norm"); "" for
/// any other module.
std::string DenseLayerTensorName(const std::string& relative_module);

/// The keys those architectures add to the common hyperparameters (phi3 only; nothing for the others).
void AppendDenseMetadata(const checkpoint::ModelConfig& config, const std::string& arch, Metadata& md);

}  // namespace quark::exporter::gguf
