// MoE calibration coverage on the quantizer's side: the default minimum of tokens per expert, the check that no
// expert whose linears need statistics went without tokens, and the per-expert counts as run metrics.
//
// The rule (issue #18): tokens are routed as the model routes them; an expert that received fewer than the minimum
// over the whole calibration set also runs, for statistics only, on the tokens that ranked it highest among those not
// routed to it (runtime/moe_block.h), up to the minimum. Every consumer of calibration statistics goes through it:
// LayerQuantizer::Calibrate (static observers), GPTQ's Hessian capture, the scaling algorithms' recorded inputs.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/runtime/decoder_layer.h"

namespace quark::quantize {

class QuantLinear;

/// Tokens each expert sees at least (routed, else topped up from its best-ranked other tokens); 0 = no top-up.
inline constexpr int64_t kDefaultMinExpertTokens = 32;

/// FAILED_PRECONDITION naming the first expert that saw no token at all (neither routed nor topped up) while one of
/// its linears among `linears` has a static activation that needs calibration.
absl::Status CheckExpertCoverage(const std::vector<runtime::ExpertCoverage>& coverage,
                                 const std::vector<std::shared_ptr<QuantLinear>>& linears, int64_t min_expert_tokens);

/// Adds the counts of one layer to `metrics`: per expert "<expert>.routed_tokens" and, where it was topped up,
/// "<expert>.topup_tokens" ("model.layers.3.mlp.experts.5.routed_tokens"); per layer "moe.layers.<i>.routed_min" (the
/// fewest tokens the router sent to one expert) and "moe.layers.<i>.experts_topped_up"; over the run
/// "moe_routed_min", "moe_experts_topped_up" and "moe_topup_tokens". `log` (may be null) gets one line per block with the per-expert lists.
void AddCoverageMetrics(const std::vector<runtime::ExpertCoverage>& coverage, int64_t layer,
                        std::map<std::string, double>& metrics, std::vector<std::string>* log);

}  // namespace quark::quantize
