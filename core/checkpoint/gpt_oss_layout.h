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
#include <string>
#include <vector>

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

}  // namespace quark::checkpoint
