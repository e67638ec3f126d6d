// The fused groups of a decoder layer's linears: the shards vLLM loads as one linear (its models'
// packed_modules_mapping: q/k/v -> qkv_proj, gate/up -> gate_up_proj, MLA's q_a_proj/kv_a_proj_with_mqa ->
// fused_qkv_a_proj) share an NVFP4 global scale and must share one scheme in a mixed recipe; every other linear is its
// own group.
#pragma once

#include <string>

namespace quark {

/// The group key of a linear by its full name, named so that key + "_proj" is the linear vLLM builds:
/// "model.layers.0.self_attn.q_proj" -> "model.layers.0.self_attn.qkv", "model.layers.0.mlp.up_proj" (a dense MLP's
/// or a shared expert's: "mlp.shared_experts.up_proj", "mlp.shared_expert.up_proj") -> "model.layers.0.mlp.gate_up",
/// "model.layers.0.self_attn.kv_a_proj_with_mqa" -> "model.layers.0.self_attn.fused_qkv_a"; any other name (routed
/// experts' linears included: vLLM's FusedMoE loads those) is its own key.
std::string FusedGroupKey(const std::string& module_name);

/// The linears that share one NVFP4 weight global scale: FusedGroupKey's groups, and each routed MoE expert's gate and
/// up projections (gate_proj/up_proj, Mixtral's w1/w3), which vLLM fuses into one w13 tensor per expert with one
/// global scale (its fused-MoE NVFP4 methods keep the gate's): "...experts.3.up_proj" -> "...experts.3.w13".
std::string Nvfp4GlobalScaleKey(const std::string& module_name);

}  // namespace quark
