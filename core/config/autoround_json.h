// The `autoround` algo_config entry (#35 item 2) in JSON: auto-round's own parameter names (Quark has no AutoRound).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"

namespace quark {

/// {"name": "autoround", "iters": 200, "lr": null, ...}: every field optional (auto-round's defaults); an unknown
/// key or a value of the wrong type is INVALID_ARGUMENT naming `path.key`. Ranges are checked by ValidateConfig.
absl::StatusOr<AutoRoundAlgo> AutoRoundFromJson(const nlohmann::ordered_json& j, const std::string& path);

/// Every field, the unset learning rates as null.
void AutoRoundToJson(const AutoRoundAlgo& a, nlohmann::ordered_json& j);

/// The range checks of ValidateConfig for one entry at `path` ("algo_config[2]"): the first problem as
/// INVALID_ARGUMENT naming `path.field`, OK otherwise.
absl::Status CheckAutoRoundRanges(const AutoRoundAlgo& a, const std::string& path);

/// Why AutoRound cannot round weights of `weight` ("" when it can): it trains offsets on an integer grid (int2 to
/// int8, uint4, uint8; symmetric or with an int32 zero point) with per-group or per-channel scales from the observed
/// minimum and maximum. Refused: no or cast weights, dynamic ones, float grids (fp8, fp6, fp4, MX, NVFP4: auto-round
/// quantizes those with other functions, not ported), per-tensor and per-block scales, power-of-two scales, float
/// zero points and rounding other than half-to-even (its round_ste is torch.round).
std::string AutoRoundWeightProblem(const std::optional<QuantSpec>& weight);

}  // namespace quark
