// HF tensor and module names of Llama 4 text (llama4_config.h), per decoder layer:
//   self_attn.{q,k,v,o}_proj (biases with attention_bias); input_layernorm, post_attention_layernorm;
//   dense layers: feed_forward.{gate,up,down}_proj (intermediate_size_mlp wide);
//   MoE layers: feed_forward.router (router [E, hidden], never quantized), feed_forward.shared_expert.{gate,up,down}_proj
//   and each expert as its own linears feed_forward.experts.E.{gate,up,down}_proj (intermediate_size wide).
// HF's Llama4TextExperts stores the experts fused (experts.gate_up_proj [E, hidden, 2 I], experts.down_proj
// [E, I, hidden]); the per-expert names are the unfused layout vLLM's llama4 loader reads for quantized checkpoints
// (as Quark and llm-compressor write them). A fused checkpoint is refused naming the tensor (llama4_layer.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/checkpoint/llama4_config.h"
#include "core/checkpoint/model_layout.h"

namespace quark::checkpoint {

/// The linears of decoder layer `layer` in forward order: q, k, v, o; the dense MLP, or the shared expert (it reads
/// every token) then each routed expert.
std::vector<LinearSpec> Llama4LayerLinears(const Llama4Config& config, int64_t layer);

/// GPTQ's inside_layer_modules for Llama 4 (Quark has no template for it): q/k/v, o, then the dense MLP's or the
/// shared expert's and each routed expert's projections as "feed_forward.experts.*.<proj>" (up before gate, as
/// Quark's MoE templates). Entries of a layer kind the model lacks are left out; in a layer of the other kind they
/// match nothing.
std::vector<std::string> Llama4GptqModules(const Llama4Config& config);

/// The norm tensors of layer `layer` (full names): input_layernorm and post_attention_layernorm.
std::vector<TensorSpec> Llama4LayerNorms(const Llama4Config& config, int64_t layer);

/// The router of layer `layer` (full name; none for a dense layer): feed_forward.router.weight [E, hidden].
std::vector<TensorSpec> Llama4RouterTensors(const Llama4Config& config, int64_t layer);

/// Every tensor of a full checkpoint: embeddings, the decoder layers, model.norm, lm_head (unless tied).
std::vector<TensorSpec> Llama4ModelTensors(const Llama4Config& config);

}  // namespace quark::checkpoint
