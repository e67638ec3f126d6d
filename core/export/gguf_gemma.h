// Gemma 2 / Gemma 3 text in llama.cpp's GGUF form, as convert_hf_to_gguf.py (conversion/gemma.py) writes them and
// llama.cpp (src/models/gemma2.cpp, gemma3.cpp) reads them:
//  - architecture "gemma2" / "gemma3"; NEOX RoPE, so no Q/K row permutation;
//  - every "*norm.weight" gets + 1 (llama.cpp's RMS norm multiplies by the stored weight; HF's Gemma norm by 1 + w);
//  - post_attention_layernorm -> post_attention_norm, pre_feedforward_layernorm -> ffn_norm (Llama's
//    post_attention_layernorm name), post_feedforward_layernorm -> post_ffw_norm, q_norm/k_norm -> attn_q/k_norm;
//  - tied: no output.weight (llama.cpp duplicates token_embd);
//  - keys attention.sliding_window, attn_logit_softcapping and final_logit_softcapping (gemma2), the global
//    rope.freq_base and rope.freq_base_swa (gemma3's rope_local_base_freq; older llama.cpp hard-codes 10000).
// What llama.cpp computes differently is refused here rather than exported wrong: it scales queries by
// head_dim**-0.5 (n_embd / n_head for its "27B" layer counts, 46 / 62) whatever query_pre_attn_scalar says, places
// windows by a fixed pattern (gemma2: even layers; gemma3: all but every 6th), always soft-caps Gemma 2 (both caps)
// and never Gemma 3's attention.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/checkpoint/model_config.h"
#include "core/export/gguf_file.h"

namespace quark::exporter::gguf {

/// "gemma2" / "gemma3" for model_type gemma2 / gemma3_text, "" for other model types; INVALID_ARGUMENT naming the
/// field for a Gemma config llama.cpp would compute differently (see above).
absl::StatusOr<std::string> GemmaGgufArchitecture(const checkpoint::ModelConfig& config);

/// llama.cpp's name of a Gemma tensor where it differs from the Llama mapping ("model.layers.3.pre_feedforward_layernorm.weight"
/// -> "blk.3.ffn_norm.weight", post-norms); "" for other tensors and for non-Gemma configs.
std::string GemmaGgufTensorName(const checkpoint::ModelConfig& config, const std::string& hf_name);

/// What the GGUF adds to a tensor's values: 1 for a Gemma "*norm.weight", else 0.
float GemmaNormShift(const checkpoint::ModelConfig& config, const std::string& hf_name);

/// The keys Gemma adds to the common hyperparameters (nothing for other architectures).
void AppendGemmaMetadata(const checkpoint::ModelConfig& config, const std::string& arch, Metadata& md);

/// For architecture gemma2 / gemma3: fills the Gemma fields of `c` (model_type gemma2 / gemma3_text, family,
/// softcaps, window and its llama.cpp pattern, query_pre_attn_scalar = head_dim, rope_local_base_freq).
absl::Status GemmaConfigFromGguf(const GgufFile& file, const std::string& arch, checkpoint::ModelConfig& c);

}  // namespace quark::exporter::gguf
