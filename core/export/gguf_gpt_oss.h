// gpt-oss in llama.cpp's `gpt-oss` GGUF layout (LLM_ARCH_OPENAI_MOE), as convert_hf_to_gguf.py's GptOssModel writes
// it and llama.cpp (src/models/openai-moe.cpp) reads it:
//   blk.N.attn_norm / post_attention_norm (input_layernorm / post_attention_layernorm), attn_{q,k,v,output} with
//   their biases, attn_sinks.weight [heads] (self_attn.sinks), ffn_gate_inp.{weight,bias} (the router, kept F32),
//   the experts stacked as ffn_{gate,up,down}_exps.{weight,bias}: HF's gate_up_proj [E, hidden, 2I] has gate and up
//   in alternate columns, so ffn_gate_exps takes rows 0, 2, 4... of each expert's [2I, hidden] weight and ffn_up_exps
//   rows 1, 3, 5... (the converter's [:, ::2] / [:, 1::2]); output.weight always (llama.cpp requires it; a tied
//   model writes the embedding there). NEOX RoPE, so no Q/K permutation.
// Metadata: head_count(_kv), key_length = value_length = head_dim, feed_forward_length = expert_feed_forward_length
// = intermediate_size, expert_count / expert_used_count, attention.sliding_window, rope.freq_base and YaRN as
// rope.scaling.{type, factor, original_context_length, yarn_beta_fast, yarn_beta_slow}. What llama.cpp hard-codes and
// the config must match: the sliding layers (even layers sliding, odd full: pattern 2), the clamped SwiGLU (alpha
// 1.702, limit 7), softmax over the top-k router logits with the router bias, q/k/v/o biases. YaRN: llama.cpp always
// floors/ceils the correction range (HF's truncate true); gpt-oss's own config says truncate false, which the
// converter writes all the same — exported likewise, with a warning that llama.cpp's RoPE then differs slightly.
// Types: F32, or Q8_0 for every 2-D/3-D weight with rows a multiple of 32 (router, norms, biases and sinks F32); the
// experts of a projection the engine quantized to OCP MXFP4 in GGML MXFP4 (general.file_type MOSTLY_MXFP4_MOE), as
// the converter writes OpenAI's MXFP4 release.
#pragma once

#include <memory>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/checkpoint/gpt_oss_config.h"
#include "core/config/layer_plan.h"
#include "core/export/gguf_file.h"
#include "core/export/gguf_gpt_oss_plan.h"  // CheckGptOssGguf, the layout
#include "core/export/gguf_vocab.h"
#include "core/export/gguf_writer.h"
#include "core/export/model_exporter.h"
#include "core/runtime/weight_source.h"

namespace quark::exporter::gguf {

/// Writes `weights` (HF's names; each expert read as its own linear mlp.experts.E.{gate_up,down}_proj when the source
/// has it, else sliced from the fused tensors) to `path`, 2-D weights in `type` (F32 or Q8_0). The experts of the
/// projections named in `mxfp4_modules` (every expert's gate_up_proj or down_proj of a layer, or none of them) are
/// written MXFP4: their values must be on MXFP4's grid (INTERNAL naming the tensor otherwise). INVALID_ARGUMENT for
/// CheckGptOssGguf's refusals, a layer whose experts are partly MXFP4 (naming the expert), a vocabulary larger than
/// vocab_size; a tensor missing or of another shape than config.json implies is named.
absl::Status WriteGptOssGguf(const checkpoint::GptOssConfig& config, const runtime::WeightSource& weights,
                             const GgufVocab& vocab, GgmlType type,
                             const std::set<std::string>& mxfp4_modules, const std::string& path);

/// The float32 weights of a gpt-oss GGUF written for `config`, dequantized, under HF's names and in HF's fused
/// layout (GptOssModelTensors: gate and up interleaved back into gate_up_proj): what the engine evaluates the export
/// with. INVALID_ARGUMENT naming a tensor that is missing or disagrees with `config`.
absl::StatusOr<std::shared_ptr<runtime::TensorMapWeightSource>> GptOssWeightsFromGguf(
    const checkpoint::GptOssConfig& config, const GgufFile& file);

/// The config of a gpt-oss GGUF as WriteGptOssGguf writes it, from its metadata, as a ModelConfig of family kGptOss
/// (config.gpt_oss set), through GptOssConfigToJson and the config parser so its validation names the field. YaRN is
/// read with truncate true (what llama.cpp computes the file with); the sliding layers are llama.cpp's even ones.
/// INVALID_ARGUMENT naming a missing key.
absl::StatusOr<checkpoint::ModelConfig> GptOssModelConfigFromGguf(const GgufFile& file);

}  // namespace quark::exporter::gguf

namespace quark::exporter {

/// The pipeline's gpt-oss GGUF exporter (`quark quantize --export gguf`): `gguf_type` F32 (default) or Q8_0 for the
/// float weights, experts quantized to OCP MXFP4 as GGML MXFP4, any other quantized linear as its dequantized values.
/// Errors before any byte is written: INVALID_ARGUMENT naming gguf_type for another type, gguf_imatrix for an
/// importance matrix, CheckGptOssGguf's refusals, a module whose activations or KV cache the plan quantizes, a missing
/// tokenizer.model; ALREADY_EXISTS when `output_file` exists.
absl::StatusOr<std::unique_ptr<ModelExporter>> CreateGptOssGgufExporter(const std::string& model_dir,
                                                                        const std::string& output_file,
                                                                        const LayerPlan& plan,
                                                                        const GgufExportOptions& options);

}  // namespace quark::exporter
