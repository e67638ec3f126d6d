// #32 item 5: `quark quantize --expert-group-size auto`: the group of routed experts (runtime/expert_streaming.h) to
// stream an MoE model with, chosen as the largest whose estimated peak host memory fits a budget. The peaks are
// EstimateJob's (job_estimate.h: the largest layer with G of its routed experts, twice while the layer is in flight,
// the activations and the process base), so the choice is as good as that formula; they do not depend on the rates.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "core/estimate/job_estimate.h"
#include "core/estimate/model_shape.h"

namespace quark::estimate {

struct ExpertGroupChoice {
  int64_t group_size = 0;          // 0: the whole layer fits (no streaming needed)
  uint64_t peak_host_bytes = 0;    // the estimated peak at group_size
  uint64_t whole_layer_bytes = 0;  // the estimated peak with the whole layer (group_size 0)
  int64_t experts = 0;             // routed experts of an MoE layer (config num_experts)
};

/// The largest G in [1, experts) whose estimated peak fits `budget_bytes`, or 0 when the whole layer does (the
/// job's own expert_group_size is ignored). INVALID_ARGUMENT when the model has no routed experts or the job runs an
/// algorithm (streaming is RTN only, as the run refuses), RESOURCE_EXHAUSTED naming the budget and the smallest peak
/// (G = 1) when not even that fits.
absl::StatusOr<ExpertGroupChoice> ChooseExpertGroupSize(const ModelShape& model, JobInputs job, uint64_t budget_bytes);

/// Whether a run of `config` can stream its routed experts: RTN schemes or GPTQ alone (no other algo_config; no
/// imatrix_mse weight observer), as QuantizeRun::CheckExpertGroupSize refuses otherwise.
bool CanStreamExperts(const Config& config);

/// The job's estimate with the least host memory it can run in: the whole layer's, or, for an MoE model whose run
/// can stream its experts (quark-worker does by itself when short of memory), one expert at a time's when smaller.
/// What quarkd records as a job's host memory need (server/api/job_estimates.h).
absl::StatusOr<JobEstimate> LeastHostMemoryEstimate(const ModelShape& model, JobInputs job, const Throughput& rates);

/// What a quantize run's choice depends on besides the model (`quark quantize --expert-group-size auto`, and the
/// worker for every job: quark-worker streams an MoE job's experts when its whole layer would not fit).
struct RunMemoryInputs {
  Config config;
  int64_t calibration_samples = 128;
  int64_t calibration_seq_len = 512;
  bool evaluates = false;          // the run measures perplexity (one window's hidden states and logits are held)
  int64_t evaluation_seq_len = 0;  // 0 = the protocol's default window
};

/// ChooseExpertGroupSize for the model folder `model_dir` (its config.json, estimate::ReadModelShape).
absl::StatusOr<ExpertGroupChoice> ChooseExpertGroupSizeForRun(const std::string& model_dir, const RunMemoryInputs& run,
                                                              uint64_t budget_bytes);

/// The host memory the kernel says is available without swapping (MemAvailable of /proc/meminfo), in bytes.
absl::StatusOr<uint64_t> MemAvailableBytes();

}  // namespace quark::estimate
