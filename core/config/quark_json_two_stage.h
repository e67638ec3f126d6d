// Quark's two-element tensor-spec lists: NVFP4 ([fp4 per_group 16, fp8_e4m3 per_tensor scale quantizer]) and #30
// W4A8's ProgressiveSpec ([fp8_e4m3 per_tensor, int4 per_channel]), each stage with Quark's full key set.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"

namespace quark {

/// NVFP4 (spec.IsNvfp4()) as Quark writes it.
nlohmann::ordered_json Nvfp4ToQuarkJson(const QuantSpec& spec);
/// W4A8 (spec.IsProgressive()) as Quark writes it: the fp8 stage (min_max, float32, static), then `spec`.
nlohmann::ordered_json ProgressiveToQuarkJson(const QuantSpec& spec);
/// A two-element list read as NVFP4 or W4A8; INVALID_ARGUMENT naming `path[i].field` for anything else.
absl::StatusOr<QuantSpec> TwoStageFromQuarkJson(const nlohmann::ordered_json& list, const std::string& path);

}  // namespace quark
