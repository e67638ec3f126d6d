// ValidateConfig's estimates and SubmitJob's fit check: core/estimate's model applied to every kind of worker
// this quarkd knows (worker_profiles.h). A kind is a device type with its measured rates and memory: identical
// hosts (rates equal to two significant digits, memory to 0.1 GiB) share one estimate.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/config/quant_spec.h"
#include "quark/v1/service.pb.h"
#include "server/api/worker_profiles.h"

namespace quark::server {

/// Fills response->estimates for `config` (resolved, without the request's algo_config, which this appends) on
/// the model in `model_dir`, one per kind of `workers` (a reference one, with a warning, when there are none).
/// Problems with the request (an unknown algorithm, an unreadable model) go to response->errors.
void AddEstimates(const quark::v1::ValidateConfigRequest& request, const quark::Config& config,
                  const std::string& model_dir, const std::vector<WorkerProfile>& workers,
                  quark::v1::ValidateConfigResponse* response);

/// RESOURCE_EXHAUSTED when at least one worker is known and the job fits none of them: its estimated peak host
/// memory is above every worker's memory ("needs 31.2 GiB host memory at phase gptq; the largest worker has 24.0
/// GiB"), or it asks for GPUs (spec.resources.gpus) and no worker has one. OK when it fits, when no worker is
/// known, or when the model cannot be inspected here (not file://: the worker finds out).
absl::Status CheckJobFits(const quark::v1::JobSpec& spec, const std::string& model_dir,
                          const std::vector<WorkerProfile>& workers);

}  // namespace quark::server
