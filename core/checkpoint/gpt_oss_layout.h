// HF tensor and module names of gpt-oss (gpt_oss_config.h), per decoder layer (HF's GptOssDecoderLayer):
//   input_layernorm, post_attention_layernorm; self_attn.{q,k,v,o}_proj with biases, self_attn.sinks [heads];
//   mlp.router.{weight [E, hidden], bias [E]};
//   mlp.experts.gate_up_proj [E, hidden, 2 I] (x @ W: columns interleaved gate 0, up 0, gate 1, up 1, ...),
//   mlp.experts.gate_up_proj_bias [E, 2 I], mlp.experts.down_proj [E, I, hidden], mlp.experts.down_proj_bias [E, hidden].
// The experts are stored fused; the runtime and the quantizer see each expert as two linears,
// mlp.experts.<e>.gate_up_proj [2 I, hidden] (= gate_up_proj[e]^T, the interleaved rows kept) and
// mlp.experts.<e>.down_proj [hidden, I] (= down_proj[e]^T), each with its bias row.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/gpt_oss_config.h"
#include "core/checkpoint/model_layout.h"

namespace quark::checkpoint {

/// The linears of a decoder layer in forward order: q, k, v, o (biases when attention_bias), then per expert
/// gate_up_proj and down_proj (routed, with biases).
std::vector<LinearSpec> GptOssLayerLinears(const GptOssConfig& config);

/// GPTQ's inside_layer_modules for gpt-oss: q/k/v together, o, each expert's gate_up_proj and down_proj as
/// "mlp.experts.*.<proj>".
std::vector<std::string> GptOssGptqModules();

/// The norm tensors of layer `layer` (full names): input_layernorm and post_attention_layernorm.
std::vector<TensorSpec> GptOssLayerNorms(const GptOssConfig& config, int64_t layer);

/// The tensors of layer `layer` kept in float, never quantized (full names): the router's weight and bias and the
/// attention sinks (vLLM and Quark's gpt-oss exports keep both unquantized).
std::vector<TensorSpec> GptOssFloatTensors(const GptOssConfig& config, int64_t layer);

/// The fused expert tensors of layer `layer` as HF stores them (full names; see the file comment).
std::vector<TensorSpec> GptOssExpertTensors(const GptOssConfig& config, int64_t layer);

/// Every tensor of a full checkpoint in HF's layout: embeddings, the layers (attention linears, norms, float tensors,
/// fused experts), model.norm, lm_head (unless tied).
std::vector<TensorSpec> GptOssModelTensors(const GptOssConfig& config);

/// GptOssModelTensors with each layer's fused experts replaced by the per-expert linears (weight and bias) the engine
/// splits them into: the layout an HF-quark export writes (AMD Quark's gpt-oss exports, what vLLM's gpt_oss loader reads
/// with quantization="quark"), and ModelTensors() of the pipeline.
std::vector<TensorSpec> GptOssSplitModelTensors(const GptOssConfig& config);

/// A per-expert tensor as a slice of a fused one: `fused`[expert], transposed for weights ([in, out] stored as x @ W).
struct GptOssExpertSlice {
  std::string fused;  // "model.layers.3.mlp.experts.gate_up_proj" or "..._bias"
  int64_t expert = 0;
  bool transposed = false;
};
/// "model.layers.L.mlp.experts.E.{gate_up,down}_proj.{weight,bias}" as its fused slice; nullopt for another name.
std::optional<GptOssExpertSlice> GptOssExpertSliceOf(const std::string& name);

/// Whether `name` is one of HF's fused expert tensors (mlp.experts.{gate_up,down}_proj[_bias], OpenAI's _blocks and
/// _scales): what the per-expert linears of an export replace.
bool IsGptOssFusedExpertTensor(const std::string& name);

/// Checks that `reader` holds the fused source of the per-expert tensor `name` (GptOssExpertSliceOf) with the shape the
/// config implies: float [E, in, out] / [E, out], or MXFP4 _blocks [E, out, in / 32, 16] and _scales [E, out, in / 32].
/// NotFound naming the tensor when neither form is stored; InvalidArgument naming the tensor and both shapes.
absl::Status CheckGptOssFusedSource(const GptOssConfig& config, const CheckpointReader& reader, const std::string& name);

}  // namespace quark::checkpoint
