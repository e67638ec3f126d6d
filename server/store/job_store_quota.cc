// The parts of the #29 storage quota (TenantStoredBytes / DeleteJob) and retention both stores share.
#include "absl/strings/str_cat.h"
#include "server/store/job_store.h"

namespace quark::server {

bool IsDeletableState(quark::v1::JobState state) {
  return state == quark::v1::JOB_STATE_SUCCEEDED || state == quark::v1::JOB_STATE_FAILED ||
         state == quark::v1::JOB_STATE_CANCELLED;
}

absl::Status JobNotDeletableError(const std::string& id, quark::v1::JobState state) {
  return absl::FailedPreconditionError(absl::StrCat("job \"", id, "\" is ", quark::v1::JobState_Name(state),
                                                    ": only a finished job can be deleted (cancel it first)"));
}

std::string FinishedJobsSql(const std::string& created_before, const std::string& after_order,
                            const std::string& limit) {
  return absl::StrCat("SELECT seq, job FROM jobs WHERE state IN (", quark::v1::JOB_STATE_SUCCEEDED, ", ",
                      quark::v1::JOB_STATE_FAILED, ", ", quark::v1::JOB_STATE_CANCELLED, ") AND created_unix_ms < ",
                      created_before, " AND seq > ", after_order, " ORDER BY seq LIMIT ", limit);
}

std::string ExcessFinishedJobsSql(const std::string& keep, const std::string& after_order, const std::string& limit) {
  // A finished job's rank: 1 + the tenant's finished jobs newer than it. Deleting older ones never changes it, so a
  // sweep may page by seq while it deletes.
  return absl::StrCat("SELECT seq, job FROM (SELECT seq, job, ROW_NUMBER() OVER (PARTITION BY tenant ORDER BY seq DESC) "
                      "AS newer FROM jobs WHERE state IN (", quark::v1::JOB_STATE_SUCCEEDED, ", ",
                      quark::v1::JOB_STATE_FAILED, ", ", quark::v1::JOB_STATE_CANCELLED, ")) ranked WHERE newer > ", keep,
                      " AND seq > ", after_order, " ORDER BY seq LIMIT ", limit);
}

}  // namespace quark::server
