// JobScheduler's deduplication (followers of a job with the same content key) and deadlines (#17).
#include "absl/strings/str_cat.h"
#include "core/base/log.h"
#include "server/log_text.h"
#include "server/scheduler/job_scheduler.h"
#include "server/scheduler/time_util.h"

namespace quark::server {

using quark::v1::Job;
using quark::v1::JobEvent;
using quark::v1::JobState;

std::string DeadlineError(const Job& job) {
  return absl::StrCat("DEADLINE_EXCEEDED: deadline of ", job.spec().deadline_seconds(), " s passed");
}

std::pair<JobState, std::string> JobScheduler::StopOutcome(const ActiveJob& active, const std::string& detail) const {
  if (active.deadline_passed) return {JobState::JOB_STATE_FAILED, absl::StrCat(DeadlineError(active.job), detail)};
  return {JobState::JOB_STATE_CANCELLED, absl::StrCat("cancelled", detail)};
}

std::optional<Job> FindContentKeyMatch(JobStore& store, const Job& job, bool reuse_succeeded) {
  absl::StatusOr<Job> match = store.FindByContentKey(job.tenant(), job.content_key());
  if (match.ok() && match->state() == JobState::JOB_STATE_SUCCEEDED && !reuse_succeeded) {
    log::Get("scheduler")->info("job={} not deduplicated from job {}: its result is not verified", job.id(),
                                match->id());
    return std::nullopt;
  }
  if (match.ok()) return *std::move(match);
  if (!absl::IsNotFound(match.status())) {
    log::Get("scheduler")->warn("job={} content key lookup failed, not deduplicated: {}", job.id(),
                                ForLog(match.status().ToString()));
  }
  return std::nullopt;
}

bool JobScheduler::DeduplicateLocked(Job* job, std::vector<JobEvent>* events, bool reuse_succeeded) {
  std::optional<Job> match = FindContentKeyMatch(*store_, *job, reuse_succeeded);
  if (!match) return false;
  // Always point at the job that ran: a deduplicated job's own origin, and a follower's leader.
  Job origin = std::move(*match);
  std::string ran = origin.deduplicated_from().empty() ? origin.id() : origin.deduplicated_from();
  if (origin.state() != JobState::JOB_STATE_SUCCEEDED) {
    auto leader = active_.find(ran);
    if (leader == active_.end() || !leader->second.job.deduplicated_from().empty()) return false;
    origin = leader->second.job;
  }
  JobEvent note = DeduplicateFrom(origin, clock_->Now(), job);
  *events = {note, StateEventLocked(*job)};
  return true;
}

JobEvent DeduplicateFrom(const Job& origin, absl::Time now, Job* job) {
  std::string ran = origin.deduplicated_from().empty() ? origin.id() : origin.deduplicated_from();
  job->set_deduplicated_from(ran);
  JobEvent note;
  *note.mutable_time() = ToTimestamp(now);
  if (origin.state() == JobState::JOB_STATE_SUCCEEDED) {
    job->set_state(JobState::JOB_STATE_SUCCEEDED);
    *job->mutable_result() = origin.result();
    *job->mutable_started_at() = ToTimestamp(now);
    *job->mutable_finished_at() = ToTimestamp(now);
    note.set_log(absl::StrCat("deduplicated from job ", ran, ": its artifacts are returned"));
  } else {
    job->set_state(origin.state());
    if (origin.state() == JobState::JOB_STATE_RUNNING) *job->mutable_started_at() = ToTimestamp(now);
    note.set_log(absl::StrCat("deduplicated from job ", ran, ": following it until it ends"));
  }
  return note;
}

void JobScheduler::FollowLeaderLocked(const Job& leader) {
  auto it = followers_.find(leader.id());
  if (it == followers_.end()) return;
  std::set<std::string> ids = it->second;
  bool final = IsFinal(leader.state());
  if (final) followers_.erase(it);
  for (const std::string& id : ids) {
    auto follower = active_.find(id);
    if (follower == active_.end()) continue;
    if (final) {
      std::string error =
          leader.error().empty() ? "" : absl::StrCat("deduplicated from job ", leader.id(), ": ", leader.error());
      FinishLocked(id, leader.state(), error, leader.has_result() ? &leader.result() : nullptr).IgnoreError();
      continue;
    }
    Job& job = follower->second.job;
    JobState from = job.state();
    if (from == leader.state()) continue;
    job.set_state(leader.state());
    if (leader.state() == JobState::JOB_STATE_RUNNING && !job.has_started_at()) {
      *job.mutable_started_at() = ToTimestamp(clock_->Now());
    }
    SaveLocked(job, {StateEventLocked(job)}).IgnoreError();
    CountStateLocked(job, from);
  }
}

void JobScheduler::ResyncFollowersLocked() {
  std::map<std::string, std::set<std::string>> all = followers_;
  for (const auto& [leader_id, ids] : all) {
    if (auto leader = active_.find(leader_id); leader != active_.end()) {
      FollowLeaderLocked(leader->second.job);
      continue;
    }
    absl::StatusOr<Job> leader = store_->GetJob(leader_id);
    if (leader.ok() && IsFinal(leader->state())) {
      FollowLeaderLocked(*leader);
      continue;
    }
    followers_.erase(leader_id);
    for (const std::string& id : ids) {
      FinishLocked(id, JobState::JOB_STATE_FAILED,
                   absl::StrCat("job ", leader_id, ", which it followed, is not active: submit again"), nullptr)
          .IgnoreError();
    }
  }
}

void JobScheduler::ExpireDeadlinesLocked(absl::Time now) {
  std::vector<std::string> expired;
  for (auto& [job_id, active] : active_) {
    int64_t seconds = active.job.spec().deadline_seconds();
    // A sweep's parent ends when its children do; they carry the same deadline.
    if (seconds <= 0 || active.deadline_passed || IsSweepParent(active.job)) continue;
    if (FromTimestamp(active.job.created_at()) + absl::Seconds(seconds) > now) continue;
    if (active.lease_id.empty()) {  // queued, or a follower: nothing to stop
      expired.push_back(job_id);
      continue;
    }
    // Stopped as by CancelJob (the worker sees cancel at its next heartbeat, is killed after the grace), but it
    // ends FAILED with the deadline error and is not retried (StopOutcome).
    active.deadline_passed = true;
    if (!active.cancel_requested) {
      active.cancel_requested = true;
      active.cancel_deadline = now + options_.cancel_grace;
    }
    JobEvent event;
    event.set_log(absl::StrCat("deadline of ", seconds, " s passed; worker ", active.job.worker_id(), " is being stopped"));
    *event.mutable_time() = ToTimestamp(now);
    SaveLocked(active.job, {event}).IgnoreError();
    log::Get("scheduler")->warn("job={} deadline of {} s passed; stopping worker={}", job_id, seconds,
                                ForLog(active.job.worker_id()));
  }
  for (const std::string& job_id : expired) {
    auto it = active_.find(job_id);
    if (it == active_.end()) continue;  // a follower that ended with its leader just now
    FinishLocked(job_id, JobState::JOB_STATE_FAILED, DeadlineError(it->second.job), nullptr).IgnoreError();
  }
}

}  // namespace quark::server
