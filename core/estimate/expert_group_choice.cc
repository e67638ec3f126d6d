#include "core/estimate/expert_group_choice.h"

#include <fstream>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace quark::estimate {
namespace {

std::string Gb(uint64_t bytes) { return absl::StrFormat("%.2f GB", static_cast<double>(bytes) / 1e9); }

bool UsesImatrixMse(const LayerQuantConfig& layer) {
  return layer.weight && layer.weight->observer == ObserverKind::kImatrixMse;
}

}  // namespace

bool CanStreamExperts(const Config& config) {
  const auto& algos = config.algo_config;
  if (algos.size() > 1) return false;
  if (algos.size() == 1) {  // GPTQ alone quantizes streamed experts expert by expert (algorithms/gptq_layer.h)
    const auto* gptq = std::get_if<GptqAlgo>(&algos[0]);
    if (gptq == nullptr || gptq->method != HessianMethod::kGptq) return false;
  }
  if (UsesImatrixMse(config.global_quant_config)) return false;
  for (const auto& [type, layer] : config.layer_type_quant_config) {
    if (UsesImatrixMse(layer)) return false;
  }
  for (const PatternQuantConfig& entry : config.layer_quant_config) {
    if (UsesImatrixMse(entry.config)) return false;
  }
  return true;
}

absl::StatusOr<JobEstimate> LeastHostMemoryEstimate(const ModelShape& model, JobInputs job, const Throughput& rates) {
  job.expert_group_size = 0;
  absl::StatusOr<JobEstimate> whole = EstimateJob(model, job, rates);
  if (!whole.ok() || model.config.num_experts <= 0 || !CanStreamExperts(job.config)) return whole;
  job.expert_group_size = 1;
  absl::StatusOr<JobEstimate> streamed = EstimateJob(model, job, rates);
  if (streamed.ok() && streamed->peak_host_bytes < whole->peak_host_bytes) return streamed;
  return whole;
}

absl::StatusOr<ExpertGroupChoice> ChooseExpertGroupSize(const ModelShape& model, JobInputs job, uint64_t budget_bytes) {
  ExpertGroupChoice choice;
  choice.experts = model.config.num_experts;
  if (choice.experts <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("expert_group_size auto: model_type ", model.config.model_type, " has no routed experts to stream"));
  }
  if (!CanStreamExperts(job.config)) {
    return absl::InvalidArgumentError("expert_group_size auto: experts stream with RTN schemes or GPTQ alone (no other algo_config, "
                                      "no imatrix_mse weights)");
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

absl::StatusOr<ExpertGroupChoice> ChooseExpertGroupSizeForRun(const std::string& model_dir, const RunMemoryInputs& run,
                                                              uint64_t budget_bytes) {
  absl::StatusOr<ModelShape> shape = ReadModelShape(model_dir);
  if (!shape.ok()) return shape.status();
  JobInputs job;
  job.config = run.config;
  job.calibration_samples = run.calibration_samples;
  job.calibration_seq_len = run.calibration_seq_len;
  if (run.evaluates) {  // the peak holds one window's hidden states and logits
    if (run.evaluation_seq_len > 0) job.evaluation_seq_len = run.evaluation_seq_len;
    job.evaluation_tokens = job.evaluation_seq_len;
  }
  return ChooseExpertGroupSize(*shape, std::move(job), budget_bytes);
}

absl::StatusOr<uint64_t> MemAvailableBytes() {
  std::ifstream meminfo("/proc/meminfo");
  for (std::string key; meminfo >> key;) {
    uint64_t kib = 0;
    if (key == "MemAvailable:" && meminfo >> kib) return kib * 1024;
    meminfo.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return absl::UnavailableError("/proc/meminfo has no MemAvailable");
}

}  // namespace quark::estimate
