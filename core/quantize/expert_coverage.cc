#include "core/quantize/expert_coverage.h"

#include <algorithm>

#include "core/base/strings.h"
#include "core/quantize/quant_linear.h"
#include "core/runtime/moe_block.h"

namespace quark::quantize {
namespace {

bool NeedsStatistics(const QuantLinear& q) {
  for (ActivationQuantizer* a : {q.input_quantizer(), q.output_quantizer()}) {
    if (a != nullptr && a->is_static() && !a->frozen()) return true;
  }
  return false;
}

}  // namespace

absl::Status CheckExpertCoverage(const std::vector<runtime::ExpertCoverage>& coverage,
                                 const std::vector<std::shared_ptr<QuantLinear>>& linears, int64_t min_expert_tokens) {
  for (const runtime::ExpertCoverage& block : coverage) {
    for (size_t e = 0; e < block.experts.size(); ++e) {
      if (block.routed[e] + block.topped_up[e] > 0) continue;
      const std::string prefix = block.experts[e] + ".";
      for (const auto& q : linears) {
        if (q->name().rfind(prefix, 0) == 0 && NeedsStatistics(*q)) {
          return runtime::NoExpertTokensError(block.experts[e], "its static activation scales", min_expert_tokens);
        }
      }
    }
  }
  return absl::OkStatus();
}

void AddCoverageMetrics(const std::vector<runtime::ExpertCoverage>& coverage, int64_t layer,
                        std::map<std::string, double>& metrics, std::vector<std::string>* log) {
  for (const runtime::ExpertCoverage& block : coverage) {
    if (block.routed.empty()) continue;
    const int64_t routed_min = *std::min_element(block.routed.begin(), block.routed.end());
    int64_t topped_experts = 0, topped_tokens = 0;
    for (int64_t t : block.topped_up) {
      topped_experts += t > 0;
      topped_tokens += t;
    }
    // Per expert, under its module name: what the router sent it, and (only where it happened) its top-up.
    for (size_t e = 0; e < block.experts.size() && e < block.routed.size(); ++e) {
      metrics[block.experts[e] + ".routed_tokens"] = static_cast<double>(block.routed[e]);
      if (e < block.topped_up.size() && block.topped_up[e] > 0) {
        metrics[block.experts[e] + ".topup_tokens"] = static_cast<double>(block.topped_up[e]);
      }
    }
    metrics[StrCat("moe.layers.", layer, ".routed_min")] = static_cast<double>(routed_min);
    metrics[StrCat("moe.layers.", layer, ".experts_topped_up")] = static_cast<double>(topped_experts);
    auto it = metrics.find("moe_routed_min");
    metrics["moe_routed_min"] = it == metrics.end() ? routed_min : std::min<double>(it->second, routed_min);
    metrics["moe_experts_topped_up"] += static_cast<double>(topped_experts);
    metrics["moe_topup_tokens"] += static_cast<double>(topped_tokens);
    if (log != nullptr) {
      log->push_back(StrCat("moe ", block.block, " routed tokens per expert [", StrJoin(block.routed, ","),
                            "] topped up [", StrJoin(block.topped_up, ","), "]"));
    }
  }
}

}  // namespace quark::quantize
