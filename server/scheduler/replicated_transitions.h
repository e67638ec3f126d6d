// The job-row transitions both halves of ReplicatedScheduler apply under a row lock (replicated_scheduler.cc: the
// client side and the sweeps; replicated_scheduler_lease.cc: the worker side). They mirror JobScheduler's
// FinishLocked / StopOutcome / RequeueOrFailLocked on a LeaseRow of the shared queue.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "server/store/shared_job_queue.h"

namespace quark::server::replicated {

/// Rows claimed or swept per statement.
inline constexpr int kStaleBatch = 100;

absl::Time At(int64_t now_ms);

/// A state-change event carrying the job as it is now.
quark::v1::JobEvent StateEvent(const quark::v1::Job& job, int64_t now_ms);

/// Forgets the row's lease (holder, expiry, stop request).
void ClearLease(LeaseRow* row);

/// The same transitions as JobScheduler::FinishLocked, on a locked row.
void Finish(int64_t now_ms, LeaseRow* row, quark::v1::JobState state, const std::string& error,
            const quark::v1::JobResult* result, std::vector<quark::v1::JobEvent>* events);

/// How a job whose stop was asked for ends (JobScheduler::StopOutcome): FAILED when SweepDeadlines asked for it
/// (it leaves the deadline error in the running job), else CANCELLED.
void FinishStopped(int64_t now_ms, LeaseRow* row, const std::string& detail, std::vector<quark::v1::JobEvent>* events);

/// The same transitions as JobScheduler::RequeueOrFailLocked.
void RequeueOrFail(int64_t now_ms, LeaseRow* row, const std::string& reason, std::vector<quark::v1::JobEvent>* events);

}  // namespace quark::server::replicated
