// Quark's own `quantization_config` dict (as in an exported config.json), so a Quark user's config works unchanged.
#pragma once

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"

namespace quark {

/// Quark's tensor-spec dict: every field written (dtype, qscheme, ch_axis, group_size, symmetric, is_dynamic,
/// round_method, scale_type, scale_format, scale_calculation_mode, mx_element_dtype, observer_cls, ...).
nlohmann::ordered_json QuantSpecToQuarkJson(const QuantSpec& spec);
/// `path` prefixes error messages ("global_quant_config.weight").
absl::StatusOr<QuantSpec> QuantSpecFromQuarkJson(const nlohmann::ordered_json& j, const std::string& path);
/// One Quark algo_config entry ({"name": "gptq", ...}); UNIMPLEMENTED naming `path` for an algorithm Quark has and
/// this engine does not parse (quarot, svdquant); INVALID_ARGUMENT for an unknown name, and for a gptaq / qronos
/// field Quark's GPTAQConfig / QronosConfig does not have.
absl::StatusOr<AlgoConfig> AlgoConfigFromQuarkJson(const nlohmann::ordered_json& j, const std::string& path);

nlohmann::ordered_json LayerConfigToQuarkJson(const LayerQuantConfig& config);
absl::StatusOr<LayerQuantConfig> LayerConfigFromQuarkJson(const nlohmann::ordered_json& j, const std::string& path);

/// The whole Config as Quark writes it (global_quant_config, layer_quant_config, layer_type_quant_config,
/// kv_cache_quant_config, exclude, algo_config, quant_mode, export{pack_method, min_kv_scale, ...}, quant_method).
nlohmann::ordered_json ConfigToQuarkJson(const Config& config);
/// Reads Quark's dict (ordered: layer_quant_config is first-match); unknown keys are ignored, bad values are INVALID_ARGUMENT naming the key path.
absl::StatusOr<Config> ConfigFromQuarkJson(const nlohmann::ordered_json& j);

}  // namespace quark
