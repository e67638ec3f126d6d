#include "server/scheduler/submission.h"

#include "absl/strings/str_cat.h"
#include "server/scheduler/job_scheduler.h"
#include "server/scheduler/storage_quota.h"
#include "server/scheduler/time_util.h"

namespace quark::server {

quark::v1::Job NewQueuedJob(const std::string& request_id, const quark::v1::JobSpec& spec, const SubmitOptions& options,
                            int default_max_attempts, absl::Time now) {
  quark::v1::Job job;
  job.set_id(NewId("job-"));
  job.set_request_id(request_id);
  job.set_tenant(options.tenant);
  job.set_state(quark::v1::JobState::JOB_STATE_QUEUED);
  *job.mutable_spec() = spec;
  if (spec.max_attempts() <= 0) job.mutable_spec()->set_max_attempts(default_max_attempts);
  *job.mutable_created_at() = ToTimestamp(now);
  job.set_content_key(options.content_key);
  job.set_needs_host_memory_bytes(options.needs_host_memory_bytes);
  job.set_needs_gpu_memory_bytes(options.needs_gpu_memory_bytes);
  return job;
}

absl::StatusOr<quark::v1::Job> QueuedJobsQuotaAnswer(JobStore& store, const SubmitOptions& options,
                                                     const std::string& request_id, int64_t queued) {
  return RepeatedRequestOr(store, options.tenant, request_id,
                           absl::ResourceExhaustedError(absl::StrCat("tenant ", options.tenant, ": quota max_queued_jobs=",
                                                                     options.max_queued_jobs, " reached (", queued,
                                                                     " jobs queued)")));
}

}  // namespace quark::server
