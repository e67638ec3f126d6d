#include "server/scheduler/replicated_transitions.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/scheduler/time_util.h"

namespace quark::server::replicated {

using quark::v1::Job;
using quark::v1::JobEvent;
using quark::v1::JobState;

absl::Time At(int64_t now_ms) { return absl::FromUnixMillis(now_ms); }

JobEvent StateEvent(const Job& job, int64_t now_ms) {
  JobEvent event;
  event.set_job_id(job.id());
  *event.mutable_time() = ToTimestamp(At(now_ms));
  event.set_state(job.state());
  *event.mutable_job() = job;
  return event;
}

void ClearLease(LeaseRow* row) {
  row->lease_id.clear();
  row->lease_worker.clear();
  row->lease_expires_ms = 0;
  row->cancel_requested = false;
  row->cancel_deadline_ms = 0;
}

void Finish(int64_t now_ms, LeaseRow* row, JobState state, const std::string& error, const quark::v1::JobResult* result,
            std::vector<JobEvent>* events) {
  Job& job = row->job;
  job.set_state(state);
  job.set_error(error);
  if (result != nullptr) *job.mutable_result() = *result;
  *job.mutable_finished_at() = ToTimestamp(At(now_ms));
  if (job.attempts_size() > 0 && !job.attempts().rbegin()->has_ended_at()) {
    quark::v1::Attempt* attempt = job.mutable_attempts(job.attempts_size() - 1);
    *attempt->mutable_ended_at() = ToTimestamp(At(now_ms));
    if (state != JobState::JOB_STATE_SUCCEEDED) attempt->set_error(error);
  }
  ClearLease(row);
  events->push_back(StateEvent(job, now_ms));
}

void FinishStopped(int64_t now_ms, LeaseRow* row, const std::string& detail, std::vector<JobEvent>* events) {
  if (absl::StartsWith(row->job.error(), "DEADLINE_EXCEEDED")) {
    return Finish(now_ms, row, JobState::JOB_STATE_FAILED, absl::StrCat(row->job.error(), detail), nullptr, events);
  }
  Finish(now_ms, row, JobState::JOB_STATE_CANCELLED, absl::StrCat("cancelled", detail), nullptr, events);
}

void RequeueOrFail(int64_t now_ms, LeaseRow* row, const std::string& reason, std::vector<JobEvent>* events) {
  Job& job = row->job;
  if (row->cancel_requested) return FinishStopped(now_ms, row, "", events);
  if (job.attempts_size() > 0 && !job.attempts().rbegin()->has_ended_at()) {
    quark::v1::Attempt* attempt = job.mutable_attempts(job.attempts_size() - 1);
    *attempt->mutable_ended_at() = ToTimestamp(At(now_ms));
    attempt->set_error(reason);
  }
  if (job.attempts_size() >= job.spec().max_attempts()) {
    std::vector<std::string> reasons;
    for (const auto& attempt : job.attempts()) {
      reasons.push_back(absl::StrCat("attempt ", attempt.number(), " on ", attempt.worker_id(), ": ", attempt.error()));
    }
    return Finish(now_ms, row, JobState::JOB_STATE_FAILED,
                  absl::StrCat("failed after ", job.attempts_size(), " attempts: ", absl::StrJoin(reasons, "; ")),
                  nullptr, events);
  }
  job.set_state(JobState::JOB_STATE_QUEUED);
  job.clear_worker_id();
  ClearLease(row);
  events->push_back(StateEvent(job, now_ms));
}

}  // namespace quark::server::replicated
