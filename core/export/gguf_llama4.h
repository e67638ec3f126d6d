// Llama 4 text in llama.cpp's `llama4` GGUF layout (LLM_ARCH_LLAMA4), as convert_hf_to_gguf.py's Llama4Model writes it
// and llama.cpp (src/models/llama4.cpp) reads it:
//   blk.N.attn_norm / ffn_norm (input_layernorm / post_attention_layernorm), attn_{q,k,v,output} unpermuted (HF's
//   Llama 4 already rotates adjacent pairs, llama.cpp's NORM RoPE: the converter's undo_permute = False); dense layers
//   ffn_{gate,up,down}; MoE layers ffn_gate_inp (the router, kept F32), the routed experts stacked as
//   ffn_{gate,up,down}_exps and the shared expert as ffn_{gate,up,down}_shexp; Llama 3 rope_scaling as the global
//   rope_freqs.weight [head_dim / 2] (the converter's generate_extra_tensors), with its parameters under
//   quark.llama3_rope.{factor, low_freq_factor, high_freq_factor, original_max_position_embeddings} for the engine's
//   read-back (keys llama.cpp does not read); output.weight unless tied.
// Metadata: feed_forward_length = intermediate_size_mlp, expert_feed_forward_length = intermediate_size,
// interleave_moe_layer_step, expert_count / expert_used_count, key_length = value_length = rope.dimension_count =
// head_dim, vocab_size. llama.cpp hard-codes the rest, and the config must match it (else INVALID_ARGUMENT naming the
// field): MoE layers every interleave_moe_layer_step-th layer (moe_layers), a NoPE layer every 4th (no_rope_layers),
// chunked attention on the RoPE layers with attention_chunk_size 8192, temperature tuning on (floor_scale 8192,
// attn_scale 0.1), the L2 QK norm exactly when the model has not 128 experts (use_qk_norm), no attention biases.
// Sigmoid top-k routing scaling the experts' input is llama.cpp's llama4 MoE as it is HF's.
// Types: F32, or Q8_0 for every 2-D/3-D weight with rows a multiple of 32; routed experts the engine quantized to OCP
// MXFP4 as GGML MXFP4.
#pragma once

#include <memory>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/checkpoint/llama4_config.h"
#include "core/config/layer_plan.h"
#include "core/export/gguf_file.h"
#include "core/export/gguf_llama4_plan.h"  // CheckLlama4Gguf, the layout
#include "core/export/gguf_vocab.h"
#include "core/export/gguf_writer.h"
#include "core/export/model_exporter.h"
#include "core/runtime/weight_source.h"

namespace quark::exporter::gguf {

/// Writes `weights` (HF's per-expert names, llama4_layout.h) to `path`, 2-D weights in `type` (F32 or Q8_0), the
/// routed experts of the projections named in `mxfp4_modules` (all experts of a layer's projection or none) in MXFP4
/// (INTERNAL naming the tensor when their values are off MXFP4's grid). INVALID_ARGUMENT for CheckLlama4Gguf's
/// refusals, experts partly MXFP4 (naming the expert), a vocabulary larger than vocab_size; a tensor missing or of
/// another shape than config.json implies is named.
absl::Status WriteLlama4Gguf(const checkpoint::Llama4Config& config, const runtime::WeightSource& weights,
                             const GgufVocab& vocab, GgmlType type,
                             const std::set<std::string>& mxfp4_modules, const std::string& path);

/// The float32 weights of a llama4 GGUF written for `config`, dequantized and under HF's names (the stacked experts
/// split per expert). INVALID_ARGUMENT naming a tensor that is missing or disagrees with `config`.
absl::StatusOr<std::shared_ptr<runtime::TensorMapWeightSource>> Llama4WeightsFromGguf(
    const checkpoint::Llama4Config& config, const GgufFile& file);

/// The config of a llama4 GGUF as WriteLlama4Gguf writes it, as a ModelConfig of family kLlama4 (config.llama4 set),
/// through Llama4ConfigToJson and the config parser: llama.cpp's fixed layout (see above). Llama 3 rope scaling is read
/// from the quark.llama3_rope.* keys the writer adds next to rope_freqs (llama.cpp ignores them; the factors alone do
/// not give the parameters back). INVALID_ARGUMENT naming a missing key.
absl::StatusOr<checkpoint::ModelConfig> Llama4ModelConfigFromGguf(const GgufFile& file);

}  // namespace quark::exporter::gguf

namespace quark::exporter {

/// The pipeline's Llama 4 GGUF exporter (`quark quantize --export gguf`), as CreateGptOssGgufExporter for gpt-oss:
/// `gguf_type` F32 (default) or Q8_0, experts quantized to OCP MXFP4 as GGML MXFP4. Errors before any byte is
/// written: INVALID_ARGUMENT naming gguf_type / gguf_imatrix, CheckLlama4Gguf's refusals, a module whose activations or
/// KV cache the plan quantizes, a missing tokenizer.model; ALREADY_EXISTS when `output_file` exists.
absl::StatusOr<std::unique_ptr<ModelExporter>> CreateLlama4GgufExporter(const std::string& model_dir,
                                                                        const std::string& output_file,
                                                                        const LayerPlan& plan,
                                                                        const GgufExportOptions& options);

}  // namespace quark::exporter
