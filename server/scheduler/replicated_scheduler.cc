#include "server/scheduler/replicated_scheduler.h"

#include <chrono>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/log.h"
#include "server/log_text.h"
#include "server/scheduler/job_scheduler.h"
#include "server/scheduler/replicated_transitions.h"
#include "server/scheduler/result_check.h"
#include "server/scheduler/storage_quota.h"
#include "server/scheduler/submission.h"
#include "server/scheduler/time_util.h"
#include "server/scheduler/worker_fit.h"

namespace quark::server {

// The row transitions shared by replicated_scheduler.cc and replicated_scheduler_lease.cc.
using replicated::At;
using replicated::StateEvent;
using replicated::Finish;
using replicated::FinishStopped;
using replicated::kStaleBatch;

namespace {

using quark::v1::Job;
using quark::v1::JobEvent;
using quark::v1::JobState;
using quark::v1::internal::LeaseResponse;

constexpr int kGaugeTicks = 10;                                       // counts read every 10th tick (~1 s)

}  // namespace

ReplicatedScheduler::ReplicatedScheduler(JobStore* store, SharedJobQueue* queue, Clock* clock, EventRelay* relay,
                                         ServerMetrics* metrics, SchedulerOptions options)
    : store_(store), queue_(queue), clock_(clock), relay_(relay), metrics_(metrics), options_(options) {
  dispatcher_ = std::thread([this] { DispatchLoop(); });
}

ReplicatedScheduler::~ReplicatedScheduler() {
  Shutdown();
  {
    std::lock_guard<std::mutex> lock(dispatch_mu_);
    dispatch_stop_ = true;
  }
  dispatch_cv_.notify_all();
  dispatcher_.join();
}

void ReplicatedScheduler::Wake() {
  wakes_.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(dispatch_mu_);
    dispatch_requested_ = true;
  }
  dispatch_cv_.notify_one();
}

void ReplicatedScheduler::AfterWrite(const LeaseRow& row, JobState from) {
  if (relay_ != nullptr) relay_->Poke(row.job.id());
  if (metrics_ == nullptr || from == row.job.state()) return;
  std::string preset = PresetLabel(row.job.spec());
  JobState state = row.job.state();
  if (IsFinal(state)) {
    metrics_->jobs_finished.WithLabels({StateLabel(state), preset}).Increment();
    if (!row.job.tenant().empty()) {
      metrics_->tenant_jobs_finished.WithLabels({row.job.tenant(), StateLabel(state)}).Increment();
    }
    if (row.job.has_started_at() && row.job.has_finished_at()) {
      metrics_->job_duration.WithLabels({StateLabel(state), preset})
          .Observe(absl::ToDoubleSeconds(FromTimestamp(row.job.finished_at()) - FromTimestamp(row.job.started_at())));
    }
  }
}

absl::Status ReplicatedScheduler::Recover() {
  // Nothing to rebuild: the queue is the jobs table. Leases of a replica that died expire on the database
  // clock and any replica's Tick requeues them.
  Tick();
  log::Get("scheduler")->info("job=- replicated scheduler: {} queued, {} running in the shared store",
                              queue_depth_.load(), running_.load());
  return absl::OkStatus();
}

absl::StatusOr<Job> ReplicatedScheduler::Submit(const std::string& request_id, const quark::v1::JobSpec& spec,
                                                const SubmitOptions& options) {
  if (IsShutDown()) return absl::UnavailableError("quarkd is shutting down");
  if (options.max_queued_jobs > 0) {
    absl::StatusOr<int64_t> queued = queue_->CountInState(JobState::JOB_STATE_QUEUED, options.tenant);
    if (!queued.ok()) return queued.status();
    if (*queued >= options.max_queued_jobs) return QueuedJobsQuotaAnswer(*store_, options, request_id, *queued);
  }
  Job job = NewQueuedJob(request_id, spec, options, options_.default_max_attempts, clock_->Now());
  absl::StatusOr<std::optional<Job>> over_quota =
      CheckStoredBytesQuota(*store_, options, request_id, static_cast<int64_t>(job.ByteSizeLong()));
  if (!over_quota.ok()) return over_quota.status();
  if (over_quota->has_value()) return **over_quota;
  std::vector<JobEvent> events;
  bool deduplicated = !options.content_key.empty() && !spec.force() &&
                      Deduplicate(&job, &events, options.reuse_succeeded);
  if (!deduplicated) events = {StateEvent(job, absl::ToUnixMillis(clock_->Now()))};
  bool created = false;
  absl::StatusOr<StoredJob> stored = store_->CreateJob(job, &events, &created);
  if (!stored.ok()) return stored.status();
  if (!created) {
    log::Get("scheduler")->info("job={} request_id={} submitted again: same job", stored->job.id(), ForLog(request_id));
    return stored->job;
  }
  if (metrics_ != nullptr) {
    metrics_->jobs_submitted.WithLabels({PresetLabel(spec)}).Increment();
    if (!job.tenant().empty()) metrics_->tenant_jobs_submitted.WithLabels({job.tenant()}).Increment();
  }
  log::Get("scheduler")->info("job={} {} preset={} priority={} model={}{}", job.id(), StateLabel(job.state()),
                              ForLog(PresetLabel(spec)), spec.priority(), ForLog(spec.model_uri()),
                              deduplicated ? absl::StrCat(" deduplicated_from=", job.deduplicated_from()) : "");
  if (relay_ != nullptr) relay_->Poke(job.id(), 1);
  if (metrics_ != nullptr && job.state() == JobState::JOB_STATE_SUCCEEDED) {
    metrics_->jobs_finished.WithLabels({StateLabel(job.state()), PresetLabel(spec)}).Increment();
  }
  if (!deduplicated) Wake();
  return stored->job;
}

absl::Status ReplicatedScheduler::AppendLog(const std::string& job_id, const std::string& text) {
  JobState state = JobState::JOB_STATE_UNSPECIFIED;
  absl::StatusOr<LeaseRow> row =
      queue_->UpdateJobRow(job_id, [&](int64_t now_ms, LeaseRow* r, std::vector<JobEvent>* events) {
        state = r->job.state();
        if (IsFinal(state)) return false;
        JobEvent& event = events->emplace_back();
        event.set_log(text);
        *event.mutable_time() = ToTimestamp(At(now_ms));
        return true;
      });
  if (!row.ok()) return row.status();
  if (IsFinal(state)) {
    return absl::FailedPreconditionError(absl::StrCat("job \"", job_id, "\" is ", StateLabel(state)));
  }
  AfterWrite(*row, state);
  return absl::OkStatus();
}

absl::StatusOr<Job> ReplicatedScheduler::Cancel(const std::string& job_id) {
  JobState from = JobState::JOB_STATE_UNSPECIFIED;
  absl::Duration grace = options_.cancel_grace;
  absl::StatusOr<LeaseRow> row =
      queue_->UpdateJobRow(job_id, [&](int64_t now_ms, LeaseRow* r, std::vector<JobEvent>* events) {
        from = r->job.state();
        if (!r->job.deduplicated_from().empty() && !IsFinal(from)) {  // a follower: no worker, its leader goes on
          Finish(now_ms, r, JobState::JOB_STATE_CANCELLED,
                 absl::StrCat("cancelled (job ", r->job.deduplicated_from(), ", which it followed, goes on)"), nullptr,
                 events);
          return true;
        }
        if (from == JobState::JOB_STATE_QUEUED) {
          Finish(now_ms, r, JobState::JOB_STATE_CANCELLED, "cancelled before it started", nullptr, events);
          return true;
        }
        if (from != JobState::JOB_STATE_RUNNING || r->cancel_requested) return false;
        r->cancel_requested = true;
        r->cancel_deadline_ms = now_ms + absl::ToInt64Milliseconds(grace);
        JobEvent& event = events->emplace_back();
        event.set_log(absl::StrCat("cancel requested; worker ", r->job.worker_id(), " is being stopped"));
        *event.mutable_time() = ToTimestamp(At(now_ms));
        return true;
      });
  if (!row.ok()) return row.status();
  AfterWrite(*row, from);
  log::Get("scheduler")->info("job={} cancel requested (was {})", job_id, StateLabel(from));
  return row->job;
}

void ReplicatedScheduler::Tick() {
  std::vector<LeaseCallback> timed_out;
  {
    absl::MutexLock lock(&mu_);
    absl::Time now = clock_->Now();
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (it->second.deadline <= now && !it->second.claiming) {
        timed_out.push_back(std::move(it->second.done));
        it = waiters_.erase(it);
      } else {
        ++it;
      }
    }
    std::set<std::string> waiting;
    for (const auto& [wait_id, waiter] : waiters_) waiting.insert(waiter.worker_id);
    for (auto it = workers_.begin(); it != workers_.end();) {
      bool silent = now - it->second.last_seen > options_.lease_timeout;
      it = silent && !waiting.count(it->first) ? workers_.erase(it) : std::next(it);
    }
  }
  for (LeaseCallback& done : timed_out) done(LeaseResponse());
  SweepDeadlines();
  Expire();
  SweepFollowers();
  if (ticks_++ % kGaugeTicks != 0) return;
  absl::StatusOr<int64_t> queued = queue_->CountInState(JobState::JOB_STATE_QUEUED, "");
  absl::StatusOr<int64_t> running = queue_->CountInState(JobState::JOB_STATE_RUNNING, "");
  if (queued.ok()) queue_depth_.store(static_cast<int>(*queued));
  if (running.ok()) running_.store(static_cast<int>(*running));
  if (metrics_ == nullptr) return;
  // Cluster-wide: every replica reports the shared queue (an autoscaler may read any of them).
  metrics_->queue_depth.Set(queue_depth_.load());
  metrics_->jobs_running.Set(running_.load());
  absl::StatusOr<std::map<std::pair<JobState, std::string>, int64_t>> counts = store_->CountJobs();
  if (counts.ok()) {
    for (const auto& [key, count] : *counts) {
      metrics_->jobs.WithLabels({StateLabel(key.first), key.second}).Set(static_cast<double>(count));
    }
  }
  absl::MutexLock lock(&mu_);
  metrics_->workers.Set(static_cast<double>(workers_.size()));
}

void ReplicatedScheduler::StopLeasing() {
  std::vector<LeaseCallback> answers;
  {
    absl::MutexLock lock(&mu_);
    leasing_stopped_ = true;
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (it->second.claiming) {
        it->second.abandoned = true;
        ++it;
        continue;
      }
      answers.push_back(std::move(it->second.done));
      it = waiters_.erase(it);
    }
  }
  for (LeaseCallback& done : answers) done(LeaseResponse());
}

void ReplicatedScheduler::Shutdown() {
  StopLeasing();
  absl::MutexLock lock(&mu_);
  shut_down_ = true;
}

bool ReplicatedScheduler::IsShutDown() const {
  absl::MutexLock lock(&mu_);
  return shut_down_;
}

void ReplicatedScheduler::SetWorkerKiller(WorkerKiller killer) {
  absl::MutexLock lock(&mu_);
  killer_ = std::move(killer);
}

void ReplicatedScheduler::SetTenantRunningLimits(std::map<std::string, int64_t> max_running) {
  {
    absl::MutexLock lock(&mu_);
    max_running_ = std::move(max_running);
  }
  Wake();  // a raised limit may free queued jobs now
}

bool ReplicatedScheduler::SetDraining(const std::string& worker_id, bool draining) {
  bool registered;
  {
    absl::MutexLock lock(&mu_);
    if (draining) {
      draining_.insert(worker_id);
    } else {
      draining_.erase(worker_id);
    }
    registered = workers_.count(worker_id) > 0;
  }
  log::Get("scheduler")->info("job=- worker={} {}", ForLog(worker_id), draining ? "draining" : "resumed");
  if (!draining) Wake();
  return registered;
}

bool ReplicatedScheduler::Deduplicate(Job* job, std::vector<JobEvent>* events, bool reuse_succeeded) {
  std::optional<Job> match = FindContentKeyMatch(*store_, *job, reuse_succeeded);
  if (!match) return false;
  Job origin = std::move(*match);
  if (origin.state() != JobState::JOB_STATE_SUCCEEDED) {
    // Follow the job that runs (a follower's leader), as it is now. Two replicas may each start a leader for one
    // key at the same moment; both then run (no cross-replica lock on keys), which costs time, not correctness.
    std::string ran = origin.deduplicated_from().empty() ? origin.id() : origin.deduplicated_from();
    absl::StatusOr<Job> leader = store_->GetJob(ran);
    if (!leader.ok() || IsFinal(leader->state()) || !leader->deduplicated_from().empty()) return false;
    origin = std::move(*leader);
  }
  absl::Time now = clock_->Now();
  JobEvent note = DeduplicateFrom(origin, now, job);
  *events = {note, StateEvent(*job, absl::ToUnixMillis(now))};
  return true;
}

void ReplicatedScheduler::SweepFollowers() {
  absl::StatusOr<std::vector<LeaseRow>> changed = queue_->UpdateFollowers(
      kStaleBatch, [](int64_t now_ms, const Job& leader, LeaseRow* row, std::vector<JobEvent>* events) {
        if (IsFinal(leader.state())) {
          Finish(now_ms, row, leader.state(),
                 leader.error().empty() ? "" : absl::StrCat("deduplicated from job ", leader.id(), ": ", leader.error()),
                 leader.has_result() ? &leader.result() : nullptr, events);
          return true;
        }
        row->job.set_state(leader.state());
        if (leader.state() == JobState::JOB_STATE_RUNNING && !row->job.has_started_at()) {
          *row->job.mutable_started_at() = ToTimestamp(At(now_ms));
        }
        events->push_back(StateEvent(row->job, now_ms));
        return true;
      });
  if (!changed.ok()) return;
  for (const LeaseRow& row : *changed) AfterWrite(row, JobState::JOB_STATE_UNSPECIFIED);
}

void ReplicatedScheduler::SweepDeadlines() {
  int64_t grace_ms = absl::ToInt64Milliseconds(options_.cancel_grace);
  absl::StatusOr<std::vector<LeaseRow>> passed = queue_->UpdateStaleRows(
      SharedJobQueue::Stale::kDeadlinePassed, "", kStaleBatch,
      [&](int64_t now_ms, LeaseRow* row, std::vector<JobEvent>* events) {
        std::string error = DeadlineError(row->job);
        if (row->lease_id.empty()) {  // queued, or a follower: nothing to stop
          Finish(now_ms, row, JobState::JOB_STATE_FAILED, error, nullptr, events);
          return true;
        }
        // Stopped as by CancelJob; the error stays in the running job for FinishStopped (no retry either way).
        row->cancel_requested = true;
        row->cancel_deadline_ms = now_ms + grace_ms;
        row->job.set_error(error);
        JobEvent& event = events->emplace_back();
        event.set_log(absl::StrCat("deadline of ", row->job.spec().deadline_seconds(), " s passed; worker ",
                                   row->job.worker_id(), " is being stopped"));
        *event.mutable_time() = ToTimestamp(At(now_ms));
        return true;
      });
  if (!passed.ok()) return;
  for (const LeaseRow& row : *passed) {
    log::Get("scheduler")->warn("job={} deadline passed: {}", row.job.id(), StateLabel(row.job.state()));
    AfterWrite(row, IsFinal(row.job.state()) ? JobState::JOB_STATE_UNSPECIFIED : row.job.state());
  }
}

int ReplicatedScheduler::LocalRunningJobs() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(local_leases_.size());
}

}  // namespace quark::server
