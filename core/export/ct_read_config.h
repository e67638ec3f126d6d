// Reads compressed-tensors' `quantization_config` (formats-2026.md 2.1-2.2) back into the engine's Config, the inverse
// of ct_config.h: every config group's QuantizationArgs as the QuantSpec the engine quantizes with (the presets'
// spelling of each scheme, so that an export read back runs the same numerics as the fake-quantized model), the
// groups' targets ("Linear", exact module names, "re:" regexes; a name or regex of any group before "Linear", as vLLM
// resolves them) and `ignore` resolved against the model's modules,
// `kv_cache_scheme` as the KV-cache output spec of k_proj / v_proj. Unknown keys and values are errors naming them
// (the library's pydantic models forbid extra keys); what the library defines but this engine does not read
// (activation ordering with g_idx, sparsity, transforms, output activations) is refused naming the field.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/config/layer_plan.h"
#include "core/config/quant_spec.h"

namespace quark::exporter {

/// The QuantSpec of one QuantizationArgs (`args`, at key path `path`) of a weight (`is_weight`) or an input
/// activation; `format` (the group's compression format) tells MX weights apart. INVALID_ARGUMENT naming
/// `path.<field>` for a value outside the library's enums or a combination the engine has no scheme for;
/// UNIMPLEMENTED for what the library defines and this reader does not (actorder with g_idx).
absl::StatusOr<QuantSpec> QuantSpecFromCtArgs(const nlohmann::json& args, bool is_weight, const std::string& format,
                                              const std::string& path);

/// The engine Config of a compressed-tensors export of a model with `modules`: one exact-name layer_quant_config
/// entry per targeted linear, `exclude` for the ignored ones, kv_cache_quant_config for kv_cache_scheme. Errors name
/// the key (`config_groups.group_0.weights.strategy`, `ignore[2]`, `kv_cache_scheme.num_bits`, ...).
absl::StatusOr<Config> ConfigFromCompressedTensors(const nlohmann::json& qc, const std::vector<ModuleInfo>& modules);

}  // namespace quark::exporter
