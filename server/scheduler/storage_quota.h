// The per-tenant storage quota (#29): a submission is refused once the tenant's stored jobs and events
// (JobStore::TenantStoredBytes, finished and cancelled jobs included until DeleteJob frees them) and the new job
// would pass SubmitOptions::max_stored_bytes. Both schedulers call it before they store a job.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "quark/v1/service.pb.h"
#include "server/scheduler/scheduler.h"
#include "server/store/job_store.h"

namespace quark::server {

/// The answer to a submission a quota refuses: the job a repeated request_id created (idempotency beats the quota),
/// else `refusal`.
absl::StatusOr<quark::v1::Job> RepeatedRequestOr(JobStore& store, const std::string& tenant,
                                                 const std::string& request_id, absl::Status refusal);

/// std::nullopt when the job may be stored (no quota, or `needed_bytes` more fit); the job a repeated request_id
/// created (idempotency beats the quota); else RESOURCE_EXHAUSTED naming the quota, the bytes stored and needed.
absl::StatusOr<std::optional<quark::v1::Job>> CheckStoredBytesQuota(JobStore& store, const SubmitOptions& options,
                                                                   const std::string& request_id,
                                                                   int64_t needed_bytes);

}  // namespace quark::server
