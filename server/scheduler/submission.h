// What both schedulers (JobScheduler in one process, ReplicatedScheduler over a shared store) do alike with a
// submission before they store it: the job they store, and the answer over the tenant's queued-jobs quota.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "quark/v1/service.pb.h"
#include "server/scheduler/scheduler.h"
#include "server/store/job_store.h"

namespace quark::server {

/// The job a submission becomes before deduplication: a fresh id, QUEUED, `spec` with max_attempts defaulted to
/// `default_max_attempts` where it asks for none, created at `now`, and the submitter's request id, tenant, content
/// key and memory needs.
quark::v1::Job NewQueuedJob(const std::string& request_id, const quark::v1::JobSpec& spec, const SubmitOptions& options,
                            int default_max_attempts, absl::Time now);

/// The answer to a submission while `queued` of the tenant's jobs wait and SubmitOptions::max_queued_jobs allows no
/// more: the job a repeated request_id created (idempotency beats the quota), else RESOURCE_EXHAUSTED naming the
/// quota and the jobs queued.
absl::StatusOr<quark::v1::Job> QueuedJobsQuotaAnswer(JobStore& store, const SubmitOptions& options,
                                                     const std::string& request_id, int64_t queued);

}  // namespace quark::server
