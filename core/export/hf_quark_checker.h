// The consumer rules of Quark's HF export (checkpoint-format.md), checked in code the way vLLM
// (`quantization="quark"`) and HF transformers read the folder. The exporter runs CheckHfQuarkExport before it
// publishes anything; an export that breaks a rule is refused.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "core/checkpoint/model_config.h"

namespace quark::exporter {

/// Problems of a `quantization_config` dict alone, each naming the key path: a missing key that vLLM indexes
/// (quant_method, global_quant_config{weight, input_tensors, output_tensors, bias}, layer_quant_config,
/// layer_type_quant_config, exclude, export{kv_cache_group, pack_method, weight_format, min_kv_scale}) or that HF
/// transformers validates (algo_config, quant_mode, kv_cache_quant_config, version); a tensor spec missing a field;
/// a glob in `exclude`; a kv_cache_group pattern without a layer_quant_config entry or with unequal / null
/// output_tensors; a non-null output_tensors or bias outside the KV-cache layers.
std::vector<std::string> QuantizationConfigProblems(const nlohmann::ordered_json& qc);

/// Schemes the export carries correctly but vLLM's quark path does not load on dense linears (NVFP4 weight-only),
/// each naming the config entry and what to do instead; the exporter reports them as notices, not refusals.
std::vector<std::string> VllmQuarkLoadWarnings(const nlohmann::ordered_json& qc);
/// The same, the model family's own (gpt-oss experts in a scheme vLLM has no MoE method for), and each MX weight whose
/// in_features is not a multiple of 32 (written with its last block padded, as Quark's exporter writes it; neither
/// vLLM nor Quark's importer loads that).
std::vector<std::string> VllmQuarkLoadWarnings(const nlohmann::ordered_json& qc, const checkpoint::ModelConfig& model);

/// Problems that need the model: for every decoder layer, the layers vLLM fuses (q/k/v -> qkv_proj, gate/up ->
/// gate_up_proj; OPT's q/k/v) must resolve to exactly equal configs and be all excluded or none.
std::vector<std::string> FusedLayerProblems(const nlohmann::ordered_json& qc, const checkpoint::ModelConfig& model);

/// The layer config vLLM resolves for `module` (layer_quant_config: a key with '*' by fnmatch, else by substring,
/// first match in order; then layer_type_quant_config["Linear"]; then global_quant_config), with the KV-cache
/// output_tensors removed as vLLM removes them. Null JSON when the dict lacks the keys.
nlohmann::ordered_json VllmLayerConfig(const nlohmann::ordered_json& qc, const std::string& module);

/// vLLM's exclusion: an exact name in `exclude`, or a "re:" regex matching from the start of the name.
bool VllmExcluded(const nlohmann::ordered_json& qc, const std::string& module);

/// Everything above plus the files: config.json with quantization_config, the safetensors (index and shards
/// consistent), and for every linear the tensors of its scheme with exact names, dtypes and shapes, KV-cache
/// scales equal within a layer and >= min_kv_scale. FAILED_PRECONDITION listing every problem.
absl::Status CheckHfQuarkExport(const std::string& dir);

}  // namespace quark::exporter
