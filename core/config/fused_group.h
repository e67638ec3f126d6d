// The fused groups of a decoder layer's linears: q/k/v and gate/up are one matrix each in vLLM (and share an NVFP4
// global scale, and must share one scheme in a mixed recipe), every other linear is its own group.
#pragma once

#include <string>

namespace quark {

/// The group key of a linear by its full name: "model.layers.0.self_attn.q_proj" -> "model.layers.0.self_attn.qkv",
/// "model.layers.0.mlp.up_proj" -> "model.layers.0.mlp.gate_up"; any other name (experts' linears included) is its
/// own key.
std::string FusedGroupKey(const std::string& module_name);

/// The linears that share one NVFP4 weight global scale: FusedGroupKey's groups, and each MoE expert's gate and up
/// projections (gate_proj/up_proj, Mixtral's w1/w3), which vLLM fuses into one w13 tensor per expert with one global
/// scale (its fused-MoE NVFP4 methods keep the gate's): "...experts.3.up_proj" -> "...experts.3.w13".
std::string Nvfp4GlobalScaleKey(const std::string& module_name);

}  // namespace quark
