// DeepSeek-V3 in llama.cpp's `deepseek2` GGUF layout, as convert_hf_to_gguf.py's DeepseekV2Model writes it:
//   MLA as MQA with big heads: head_count_kv 1, key_length kv_lora_rank + qk_rope_head_dim, value_length
//   kv_lora_rank, key_length_mla qk_nope + qk_rope, value_length_mla v_head_dim; kv_b_proj split per head into
//   attn_k_b [n_head, kv_lora, nope] (k transposed, for the absorbed product) and attn_v_b [n_head, v, kv_lora];
//   the routed experts stacked into ffn_{gate,up,down}_exps, the shared experts as ffn_*_shexp, the router as
//   ffn_gate_inp, e_score_correction_bias as exp_probs_b.bias; sigmoid gating (expert_gating_func 2), expert groups,
//   expert_weights_scale / _norm, leading_dense_block_count; YaRN as rope.scaling.{type, factor,
//   original_context_length, yarn_log_multiplier = 0.1 * mscale_all_dim}. RoPE rows are not permuted: llama.cpp
//   rotates adjacent pairs, the checkpoint's own (rope_interleave) order.
// The MTP layers are left out, as the converter leaves them out (llama.cpp's forward never runs them).
// Types: F32, or Q8_0 for every 2-D/3-D weight whose rows are a multiple of 32 (the router, norms and exp_probs_b
// stay F32, as llama-quantize keeps them; a weight with shorter rows stays F32).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/checkpoint/deepseek_config.h"
#include "core/export/gguf_deepseek_plan.h"  // CheckDeepseekGguf, the layout
#include "core/export/gguf_file.h"
#include "core/export/gguf_vocab.h"
#include "core/runtime/weight_source.h"

namespace quark::exporter::gguf {

/// Writes `weights` (a deepseek_v3 checkpoint) to `path` in `type` (kF32 or kQ8_0). INVALID_ARGUMENT naming the field
/// for what deepseek2 cannot express: YaRN's attention_factor other than 1 (rope_scaling.mscale differing from
/// mscale_all_dim, or an explicit attention_factor), rope_interleave false, q_lora_rank null except with 26 or 27
/// layers (llama.cpp tells DeepSeek-V2-Lite's plain q_proj by its layer count) or set with them; a vocabulary larger
/// than vocab_size.
absl::Status WriteDeepseekGguf(const checkpoint::DeepseekConfig& config, const runtime::WeightSource& weights,
                               const GgufVocab& vocab, GgmlType type, const std::string& path);

/// The float32 weights of a deepseek2 GGUF written for `config`, dequantized and under their HF names (attn_k_b and
/// attn_v_b joined back into kv_b_proj, the stacked experts split): what the runtime evaluates the export with.
/// INVALID_ARGUMENT naming a tensor that is missing or disagrees with `config`.
absl::StatusOr<std::shared_ptr<runtime::TensorMapWeightSource>> DeepseekWeightsFromGguf(
    const checkpoint::DeepseekConfig& config, const GgufFile& file);

/// The config of a deepseek2 GGUF as WriteDeepseekGguf writes it, from its metadata, as a ModelConfig of family
/// kDeepseek (config.deepseek set): the keys become config.json's fields and go through ParseDeepseekConfig, so its
/// validation names the field. What the file does not carry: YaRN's beta_fast / beta_slow (llama.cpp's defaults 32 and
/// 1), mscale (= mscale_all_dim = yarn_log_multiplier / 0.1, as llama.cpp assumes), the MTP layers (none).
/// INVALID_ARGUMENT naming a missing key.
absl::StatusOr<checkpoint::ModelConfig> DeepseekModelConfigFromGguf(const GgufFile& file);

}  // namespace quark::exporter::gguf
