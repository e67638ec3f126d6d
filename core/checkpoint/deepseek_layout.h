// HF tensor and module names of DeepSeek-V3 (deepseek_config.h), per decoder layer:
//   self_attn.{q_a_proj, q_a_layernorm, q_b_proj} (or q_proj when q_lora_rank is null), self_attn.kv_a_proj_with_mqa,
//   self_attn.kv_a_layernorm, self_attn.kv_b_proj, self_attn.o_proj; input_layernorm, post_attention_layernorm;
//   layers [0, first_k_dense_replace): mlp.{gate,up,down}_proj; the others: mlp.gate (router [E, hidden]) with
//   mlp.gate.e_score_correction_bias [E], mlp.shared_experts.{gate,up,down}_proj, mlp.experts.E.{gate,up,down}_proj.
// The MTP (next-token prediction) layers follow the decoder layers as model.layers.<num_hidden_layers + i>: a whole
// MoE decoder layer plus enorm, hnorm, eh_proj [hidden, 2 hidden], shared_head.{norm, head} and embed_tokens. HF's
// DeepseekV3Model ignores them (_keys_to_ignore_on_load_unexpected) and so does the forward here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/checkpoint/deepseek_config.h"
#include "core/checkpoint/model_layout.h"

namespace quark::checkpoint {

/// The linears of decoder layer `layer` in forward order: attention (q_a_proj and kv_a_proj_with_mqa first: both read
/// input_layernorm), then the dense MLP or the shared experts (they read every token) and each routed expert.
std::vector<LinearSpec> DeepseekLayerLinears(const DeepseekConfig& config, int64_t layer);

/// GPTQ's inside_layer_modules for DeepSeek (Quark has no template for it): the linears in forward order, those reading
/// the same input together, each routed expert's projection once as "mlp.experts.*.<proj>" (up before gate, as
/// Quark's MoE templates). The dense MLP's entries only when some layer is dense, the experts' only when some is MoE;
/// in a layer that lacks them they match nothing.
std::vector<std::string> DeepseekGptqModules(const DeepseekConfig& config);

/// The norm tensors of layer `layer` (full names): input/post-attention norms and MLA's q_a / kv_a norms.
std::vector<TensorSpec> DeepseekLayerNorms(const DeepseekConfig& config, int64_t layer);

/// The router tensors of layer `layer` (full names; none for a dense layer): mlp.gate.weight [E, hidden] and
/// mlp.gate.e_score_correction_bias [E]. Never quantized (vLLM keeps the gate in float).
std::vector<TensorSpec> DeepseekRouterTensors(const DeepseekConfig& config, int64_t layer);

/// Every tensor of MTP layer `mtp` (0-based, stored as model.layers.<num_hidden_layers + mtp>).
std::vector<TensorSpec> DeepseekMtpTensors(const DeepseekConfig& config, int64_t mtp);

/// Whether `tensor` belongs to an MTP layer (model.layers.<i>. with i >= num_hidden_layers).
bool IsDeepseekMtpTensor(const DeepseekConfig& config, const std::string& tensor);

/// Every tensor of a full checkpoint: embeddings, the decoder layers, the MTP layers, model.norm, lm_head.
std::vector<TensorSpec> DeepseekModelTensors(const DeepseekConfig& config);

}  // namespace quark::checkpoint
