// gpt-oss (#32) in an HF-quark export. HF's and OpenAI's checkpoints store a layer's experts fused
// (mlp.experts.gate_up_proj [E, hidden, 2 I], down_proj [E, I, hidden] and their biases; OpenAI's as MXFP4 _blocks and
// _scales); the engine quantizes each expert's gate_up_proj [2 I, hidden] (interleaved gate/up rows kept) and down_proj
// as linears, and the export writes them per expert, mlp.experts.E.{gate_up,down}_proj.{weight, bias, weight_scale,
// input_scale, ...}, as AMD Quark's gpt-oss exports do and as vLLM's gpt_oss.py reads them with quantization="quark"
// (its WeightsMapper maps ".gate_up_proj.weight" to ".w13_weight", _load_weights_quark copies each into the expert its
// name carries). The fused source tensors are not copied; the router, its bias and the sinks are copied in float.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/model_config.h"

namespace quark::exporter {

/// The [out, in] of the per-expert linear `module` ("model.layers.3.mlp.experts.5.gate_up_proj") of a gpt-oss whose
/// `reader` does not hold it by name (the experts are stored fused); nullopt for any other module or family.
std::optional<std::vector<int64_t>> FusedExpertLinearShape(const checkpoint::ModelConfig& model,
                                                           const checkpoint::CheckpointReader& reader,
                                                           const std::string& module);

/// Whether the source tensor `name` is a gpt-oss fused expert tensor, which the per-expert linears replace.
bool ReplacedByExpertLinears(const checkpoint::ModelConfig& model, const std::string& name);

/// Expert schemes the export carries correctly but vLLM does not load: its QuarkMoEMethod has methods for fp8 W8A8
/// (per tensor or per channel) and OCP MX fp4/fp6 weights (QuarkW4MXFp4MoEMethod_OSS for gpt-oss), and raises
/// "Unsupported FusedMoe scheme" for anything else (int4/uint4 weight-only experts). One notice per distinct scheme,
/// naming an expert that resolves to it; empty for other families.
std::vector<std::string> GptOssVllmLoadWarnings(const nlohmann::ordered_json& qc, const checkpoint::ModelConfig& model);

}  // namespace quark::exporter
