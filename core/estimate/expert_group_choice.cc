#include "core/estimate/expert_group_choice.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace quark::estimate {
namespace {

std::string Gb(uint64_t bytes) { return absl::StrFormat("%.2f GB", static_cast<double>(bytes) / 1e9); }

}  // namespace

absl::StatusOr<ExpertGroupChoice> ChooseExpertGroupSize(const ModelShape& model, JobInputs job, uint64_t budget_bytes) {
  ExpertGroupChoice choice;
  choice.experts = model.config.num_experts;
  if (choice.experts <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("expert_group_size auto: model_type ", model.config.model_type, " has no routed experts to stream"));
  }
  const Throughput rates = ReferenceThroughput();  // the peaks do not depend on the rates
  const auto peak = [&](int64_t group) -> absl::StatusOr<uint64_t> {
    job.expert_group_size = group;
    auto e = EstimateJob(model, job, rates);
    if (!e.ok()) return e.status();
    return e->peak_host_bytes;
  };
  auto whole = peak(0);
  if (!whole.ok()) return whole.status();
  choice.whole_layer_bytes = *whole;
  if (*whole <= budget_bytes) {
    choice.peak_host_bytes = *whole;
    return choice;
  }
  auto smallest = peak(1);
  if (!smallest.ok()) return smallest.status();
  if (*smallest > budget_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "expert_group_size auto: even one routed expert at a time needs an estimated ", Gb(*smallest),
        " of host memory (the whole layer ", Gb(*whole), ") but the memory budget is ", Gb(budget_bytes),
        ": a larger budget (quark quantize --memory-budget-gb), or fewer or shorter calibration samples"));
  }
  // The peak grows with G: the largest G in [1, experts) that fits, by bisection (lo fits, hi does not).
  int64_t lo = 1, hi = choice.experts;
  uint64_t lo_peak = *smallest;
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    auto p = peak(mid);
    if (!p.ok()) return p.status();
    if (*p <= budget_bytes) {
      lo = mid;
      lo_peak = *p;
    } else {
      hi = mid;
    }
  }
  choice.group_size = lo;
  choice.peak_host_bytes = lo_peak;
  return choice;
}

}  // namespace quark::estimate
