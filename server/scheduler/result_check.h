// What a worker reports is checked before it is shown to anyone: a worker (or whoever holds a worker token) could
// otherwise complete its lease with artifact URIs of another tenant's model or file:///etc/shadow, which the job's
// tenant would be shown and deduplication would hand to the tenant's later identical jobs. A job's artifacts are
// written under <spec.output_uri>/<job id>/ (the worker's publish step, worker/storage/publish.h), so a result naming
// anything else is refused and the job fails.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "quark/v1/service.pb.h"
#include "quark/v1/worker.pb.h"
#include "server/store/job_store.h"

namespace quark::server {

/// The prefix every artifact of `job` lies under: spec.output_uri (trailing '/' dropped) + "/" + id + "/".
std::string JobOutputPrefix(const quark::v1::Job& job);

/// OK when every artifact URI and the manifest URI (when set) of `result` lies strictly under JobOutputPrefix(job)
/// and the rest of it has no empty, "." or ".." segment, percent escape, backslash or control character. Else
/// PERMISSION_DENIED naming the field ("result.artifacts[1].uri") and quoting at most 200 bytes of the URI.
/// #33 item 2, fencing: a worker publishes into its attempt's folder, <prefix>attempt-<N>/ (N = the job's attempt
/// under the lease, job.attempts_size()); a URI in another attempt's folder is PERMISSION_DENIED too, so a result
/// is taken only from the current attempt. URIs directly under the prefix (workers before fencing) still pass.
absl::Status CheckResultUris(const quark::v1::Job& job, const quark::v1::JobResult& result);

/// The failed job's error for a refused result: "completion refused: worker <id> reported ...".
std::string ForgedResultError(const std::string& worker_id, const absl::Status& refusal);

/// A completion whose lease is gone (`not_held`, NOT_FOUND) may be the retry of one quarkd took but never answered:
/// the reply was lost, or the database committed and then went away before saying so. OK when the request is a
/// success naming its job (`job_id`) and that job SUCCEEDED with the same manifest URI (one per attempt: a superseded
/// attempt's result never matches); otherwise `not_held` unchanged. Nothing is written either way.
absl::Status AnswerRepeatedCompletion(JobStore& store, const quark::v1::internal::CompleteRequest& request,
                                      absl::Status not_held);

}  // namespace quark::server
