// The rules vLLM's compressed_tensors path applies to a mixture-of-experts block (CompressedTensorsMoEMethod
// .get_moe_method, vllm/model_executor/layers/quantization/compressed_tensors/compressed_tensors_moe/): the routed
// experts load as one fused tensor per projection, so every expert linear of a block must carry the same scheme,
// vLLM looks that scheme up under its own names (`<block>.0.gate_proj`, `.0.up_proj`, `.0.down_proj`, whatever the
// checkpoint calls them), and only some schemes have a fused-MoE kernel. Shared by the writer (refusals before any
// work) and the checker (run on every export).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checkpoint/model_config.h"

namespace quark::exporter {

/// OK for a model without routed experts and for the families whose experts the engine holds as per-expert linears
/// under names vLLM's compressed_tensors path maps onto its FusedMoE (mixtral, qwen2_moe, qwen3_moe, deepseek_v3,
/// llama4_text), as llm-compressor writes them; UNIMPLEMENTED naming the model_type and the reason for gpt-oss (vLLM's
/// gpt_oss loader takes only float experts outside its mxfp4 and quark paths) and any other fused-expert family.
absl::Status CtSupportsExperts(const checkpoint::ModelConfig& model);

/// The fused-MoE method vLLM picks for a config group (null JSON: the experts are ignored, UnquantizedFusedMoEMethod):
/// CompressedTensorsW4A4Mxfp4MoEMethod, ...W8A8Mxfp8MoEMethod, ...WNA16MarlinMoEMethod (int weights per channel or
/// group, no activations, pack-quantized, 4 or 8 bits), ...W4A4Nvfp4MoEMethod (NVFP4 weights, NVFP4 or no
/// activations), ...W8A8Fp8MoEMethod (vLLM's _is_fp8_w8a8), ...W8A8Int8MoEMethod (int8 per-channel weights, dynamic
/// per-token int8 activations). FAILED_PRECONDITION with vLLM's own message otherwise (e.g. W8A8 int8 static per
/// tensor, fp8 weight only). `format` is the group's format, else the global one.
absl::StatusOr<std::string> VllmCtMoeMethod(const nlohmann::json& group, const std::string& format);

/// The MoE block a routed expert linear belongs to ("model.layers.1.mlp.experts.3.down_proj" ->
/// "model.layers.1.mlp.experts"), "" for any other linear (a shared expert's included).
std::string MoeBlockOf(const std::string& module);

/// Problems of the routed expert linears `routed` (full names) under `qc`: per block, every expert linear in the
/// first one's config group (or all ignored), vLLM's lookup names in that same group, and a group VllmCtMoeMethod
/// accepts. Each problem names the module, block or group.
std::vector<std::string> CtMoeProblems(const nlohmann::json& qc, const std::vector<std::string>& routed);

}  // namespace quark::exporter
