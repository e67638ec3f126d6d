// vLLM's rules for the experts of an MoE model in an HF-quark export (mixtral, qwen2_moe, qwen3_moe), as its FusedMoE
// layer loads them with quantization="quark":
//   - each expert's gate and up projections (w1/w3) become one w13 tensor: identical configs, excluded alike;
//   - one FusedMoE holds every expert of a layer and runs one quantization method for all of them: every expert's gate,
//     up and down resolve to the same config as expert 0's, excluded alike;
//   - qwen2_moe's shared expert is a dense MLP with gate_up_proj: its gate and up agree as well;
//   - the routers (gate, shared_expert_gate) are built unquantized: their weights stay float, with no scale tensors.
// The per-expert tensors themselves (weight, weight_scale, input_scale per expert) are checked by CheckHfQuarkExport
// through LayerLinears, which lists every expert's linears.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/deepseek_config.h"
#include "core/checkpoint/gpt_oss_config.h"
#include "core/checkpoint/llama4_config.h"
#include "core/checkpoint/model_config.h"

namespace quark::exporter {

/// Problems with the configs the experts of `model` resolve to, one line each naming the module.
std::vector<std::string> MoeConfigProblems(const nlohmann::ordered_json& qc, const checkpoint::ModelConfig& model);

/// Problems with the routers' tensors in `reader`: missing, not float, wrong shape, or carrying scales.
std::vector<std::string> MoeRouterProblems(const checkpoint::ModelConfig& model, const checkpoint::CheckpointReader& reader);

/// DeepSeek-V3 (#32) as vLLM's deepseek_v2.py loads it with quantization="quark": q_a_proj and kv_a_proj_with_mqa
/// become fused_qkv_a_proj (with q_lora_rank), the dense MLP's and the shared experts' gate and up become gate_up_proj,
/// the routed experts one FusedMoE per layer (an expert's up agrees with its gate, every expert with expert 0). The
/// router mlp.gate is a ReplicatedLinear built without quantization and the MTP layers (model.layers.<i> with i >=
/// num_hidden_layers) are skipped by the main model's load_weights, so neither constrains the config. One line per
/// problem, naming the module.
std::vector<std::string> DeepseekConfigProblems(const nlohmann::ordered_json& qc, const checkpoint::DeepseekConfig& model);

/// Llama 4 text (#32) as vLLM's llama4.py loads it with quantization="quark": q/k/v become qkv_proj, the dense
/// feed_forward's and the shared expert's gate and up become gate_up_proj, the routed experts one FusedMoE per MoE layer
/// (an expert's up agrees with its gate, every expert with expert 0). The router is a ReplicatedLinear built without
/// quantization. One line per problem, naming the module.
std::vector<std::string> Llama4ConfigProblems(const nlohmann::ordered_json& qc, const checkpoint::Llama4Config& model);

/// gpt-oss (#32) as vLLM's gpt_oss.py loads it with quantization="quark" (_load_weights_quark): q/k/v become qkv_proj;
/// each layer's experts one FusedMoE whose w13/w2 are filled expert by expert from mlp.experts.E.gate_up_proj and
/// down_proj (".gate_up_proj.weight" -> w13_weight, bias, weight_scale, input_scale likewise): every expert agrees with
/// expert 0, and none is excluded (a float per-expert gate_up_proj would be read as the w1 shard alone). The router and
/// the sinks are built unquantized. One line per problem, naming the module.
std::vector<std::string> GptOssConfigProblems(const nlohmann::ordered_json& qc, const checkpoint::GptOssConfig& model);

}  // namespace quark::exporter
