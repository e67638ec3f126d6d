#include "server/scheduler/job_scheduler.h"

#include <openssl/rand.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/log.h"
#include "server/log_text.h"
#include "server/scheduler/storage_quota.h"
#include "server/scheduler/submission.h"
#include "server/scheduler/time_util.h"

namespace quark::server {

using quark::v1::Job;
using quark::v1::JobEvent;
using quark::v1::JobState;

std::string NewId(const std::string& prefix) {
  // 128 bits from OpenSSL's CSPRNG: ids are unguessable (a lease id is what a worker proves its lease with; a job id
  // of another tenant must not be found by counting) and never collide.
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) std::abort();  // no entropy: nothing safe to hand out
  std::string out = prefix;
  static const char kHex[] = "0123456789abcdef";
  for (unsigned char byte : bytes) {
    out.push_back(kHex[byte >> 4]);
    out.push_back(kHex[byte & 15]);
  }
  return out;
}

bool IsFinal(JobState state) {
  return state == JobState::JOB_STATE_SUCCEEDED || state == JobState::JOB_STATE_FAILED ||
         state == JobState::JOB_STATE_CANCELLED;
}

JobScheduler::JobScheduler(JobStore* store, Clock* clock, EventHub* hub, ServerMetrics* metrics,
                           SchedulerOptions options)
    : store_(store), clock_(clock), hub_(hub), metrics_(metrics), options_(options) {}

JobScheduler::~JobScheduler() { Shutdown(); }

void JobScheduler::SetWorkerKiller(WorkerKiller killer) {
  absl::MutexLock lock(&mu_);
  killer_ = std::move(killer);
}

bool JobScheduler::IsShutDown() const {
  absl::MutexLock lock(&mu_);
  return shut_down_;
}

int JobScheduler::QueueDepth() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(queue_.size());
}

int JobScheduler::RunningJobs() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(leases_.size());
}

JobEvent JobScheduler::StateEventLocked(const Job& job) {
  JobEvent event;
  event.set_job_id(job.id());
  *event.mutable_time() = ToTimestamp(clock_->Now());
  event.set_state(job.state());
  *event.mutable_job() = job;
  return event;
}

absl::Status JobScheduler::SaveLocked(Job& job, std::vector<JobEvent> events) {
  absl::Status status = store_->UpdateJob(job, &events);
  if (!status.ok()) {
    log::Get("store")->error("job={} save failed: {}", job.id(), ForLog(status.ToString()));
    return status;
  }
  for (const JobEvent& event : events) hub_->Publish(event);
  return absl::OkStatus();
}

void JobScheduler::CountTenantLocked(const std::string& tenant, JobState state, int delta) {
  if (state != JobState::JOB_STATE_QUEUED && state != JobState::JOB_STATE_RUNNING) return;
  TenantCounts& counts = tenants_[tenant];
  (state == JobState::JOB_STATE_QUEUED ? counts.queued : counts.running) += delta;
  if (metrics_ != nullptr && !tenant.empty()) {
    metrics_->tenant_jobs.WithLabels({tenant, StateLabel(state)}).Add(delta);
  }
}

void JobScheduler::SetTenantRunningLimits(std::map<std::string, int64_t> max_running) {
  Answers answers;
  {
    absl::MutexLock lock(&mu_);
    max_running_ = std::move(max_running);
    DispatchLocked(&answers);  // a raised limit may free queued jobs now
    UpdateGaugesLocked();
  }
  for (auto& answer : answers) answer();
}

bool JobScheduler::SetDraining(const std::string& worker_id, bool draining) {
  Answers answers;
  bool registered;
  {
    absl::MutexLock lock(&mu_);
    if (draining) {
      draining_.insert(worker_id);
    } else {
      draining_.erase(worker_id);
      DispatchLocked(&answers);
    }
    registered = workers_.count(worker_id) > 0;
    log::Get("scheduler")->info("job=- worker={} {}", ForLog(worker_id), draining ? "draining" : "resumed");
  }
  for (auto& answer : answers) answer();
  return registered;
}

void JobScheduler::CountStateLocked(const Job& job, JobState from) {
  // A follower (deduplicated) holds no worker: it counts toward neither the tenant's queued quota nor its
  // running limit.
  // Nor does a sweep's parent (#36): it runs nothing itself, its children count.
  if (job.deduplicated_from().empty() && !IsSweepParent(job)) {
    CountTenantLocked(job.tenant(), from, -1);
    CountTenantLocked(job.tenant(), job.state(), +1);
  }
  if (metrics_ == nullptr) return;
  std::string preset = PresetLabel(job.spec());
  if (from != JobState::JOB_STATE_UNSPECIFIED) metrics_->jobs.WithLabels({StateLabel(from), preset}).Add(-1);
  metrics_->jobs.WithLabels({StateLabel(job.state()), preset}).Add(1);
}

void JobScheduler::UpdateGaugesLocked() {
  if (metrics_ == nullptr) return;
  metrics_->queue_depth.Set(static_cast<double>(queue_.size()));
  metrics_->jobs_running.Set(static_cast<double>(leases_.size()));
  metrics_->workers.Set(static_cast<double>(workers_.size()));
  int busy = 0;
  for (const auto& [id, worker] : workers_) busy += worker.leases.empty() ? 0 : 1;
  metrics_->workers_busy.Set(busy);
}

absl::Status JobScheduler::Recover() {
  absl::StatusOr<std::vector<StoredJob>> jobs =
      store_->LoadJobs({JobState::JOB_STATE_QUEUED, JobState::JOB_STATE_RUNNING});
  if (!jobs.ok()) return jobs.status();
  absl::StatusOr<std::map<std::pair<JobState, std::string>, int64_t>> counts = store_->CountJobs();
  if (!counts.ok()) return counts.status();
  {
    absl::MutexLock lock(&mu_);
    if (metrics_ != nullptr) {
      for (const auto& [key, count] : *counts) {
        metrics_->jobs.WithLabels({StateLabel(key.first), key.second}).Set(static_cast<double>(count));
      }
    }
    int requeued = 0;
    for (StoredJob& stored : *jobs) {
      if (stored.job.deduplicated_from().empty() && !IsSweepParent(stored.job)) {
        CountTenantLocked(stored.job.tenant(), stored.job.state(), +1);
      }
      ActiveJob& active = active_[stored.job.id()];
      active.order = stored.order;
      active.job = std::move(stored.job);
      if (!active.job.deduplicated_from().empty()) {  // a follower: never queued, caught up below
        followers_[active.job.deduplicated_from()].insert(active.job.id());
        continue;
      }
      if (IsSweepParent(active.job)) continue;  // never leased: its rows are caught up below
      if (active.job.state() == JobState::JOB_STATE_QUEUED) {
        queue_.insert(KeyOf(active));
        continue;
      }
      ++requeued;
      RequeueOrFailLocked(active, absl::StrCat("quarkd restarted while worker ", active.job.worker_id(),
                                               " ran the job; its lease was lost"));
    }
    ResyncFollowersLocked();
    ResyncSweepsLocked();
    UpdateGaugesLocked();
    log::Get("scheduler")->info("job=- recovered {} queued jobs ({} were running and lost their lease)", queue_.size(),
                                requeued);
  }
  WriteEndingManifests();  // parents that ended with what quarkd missed while it was down
  return absl::OkStatus();
}

absl::StatusOr<Job> JobScheduler::Submit(const std::string& request_id, const quark::v1::JobSpec& spec,
                                         const SubmitOptions& options) {
  Answers answers;
  absl::StatusOr<Job> job;
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return absl::UnavailableError("quarkd is shutting down");
    job = SubmitLocked(request_id, spec, options, "");
    if (job.ok()) DispatchLocked(&answers);
    UpdateGaugesLocked();
  }
  for (auto& answer : answers) answer();
  return job;
}

absl::StatusOr<Job> JobScheduler::SubmitLocked(const std::string& request_id, const quark::v1::JobSpec& spec,
                                               const SubmitOptions& options, const std::string& parent_id) {
  if (options.max_queued_jobs > 0 && tenants_[options.tenant].queued >= options.max_queued_jobs) {
    return QueuedJobsQuotaAnswer(*store_, options, request_id, tenants_[options.tenant].queued);
  }
  Job job = NewQueuedJob(request_id, spec, options, options_.default_max_attempts, clock_->Now());
  job.set_parent_id(parent_id);
  absl::StatusOr<std::optional<Job>> over_quota =
      CheckStoredBytesQuota(*store_, options, request_id, static_cast<int64_t>(job.ByteSizeLong()));
  if (!over_quota.ok()) return over_quota.status();
  if (over_quota->has_value()) return **over_quota;
  std::vector<JobEvent> events;
  bool deduplicated = !options.content_key.empty() && !spec.force() &&
                      DeduplicateLocked(&job, &events, options.reuse_succeeded);
  if (!deduplicated) events = {StateEventLocked(job)};
  bool created = false;
  absl::StatusOr<StoredJob> stored = store_->CreateJob(job, &events, &created);
  if (!stored.ok()) return stored.status();
  if (!created) {
    log::Get("scheduler")->info("job={} request_id={} submitted again: same job", stored->job.id(),
                                ForLog(request_id));
    return stored->job;
  }
  if (job.state() != JobState::JOB_STATE_SUCCEEDED) {
    ActiveJob& active = active_[job.id()];
    active.order = stored->order;
    active.job = job;
    if (deduplicated) {
      followers_[job.deduplicated_from()].insert(job.id());
    } else {
      queue_.insert(KeyOf(active));
    }
  } else if (metrics_ != nullptr) {
    metrics_->jobs_finished.WithLabels({StateLabel(job.state()), PresetLabel(spec)}).Increment();
  }
  for (const JobEvent& event : events) hub_->Publish(event);
  if (metrics_ != nullptr) metrics_->jobs_submitted.WithLabels({PresetLabel(spec)}).Increment();
  if (metrics_ != nullptr && !job.tenant().empty()) {
    metrics_->tenant_jobs_submitted.WithLabels({job.tenant()}).Increment();
  }
  CountStateLocked(job, JobState::JOB_STATE_UNSPECIFIED);
  log::Get("scheduler")->info("job={} {} preset={} priority={} model={}{}", job.id(), StateLabel(job.state()),
                              ForLog(PresetLabel(spec)), spec.priority(), ForLog(spec.model_uri()),
                              deduplicated ? absl::StrCat(" deduplicated_from=", job.deduplicated_from()) : "");
  return job;
}

absl::Status JobScheduler::AppendLog(const std::string& job_id, const std::string& text) {
  absl::MutexLock lock(&mu_);
  auto it = active_.find(job_id);
  if (it == active_.end()) {
    absl::StatusOr<Job> job = store_->GetJob(job_id);
    if (!job.ok()) return job.status();
    return absl::FailedPreconditionError(absl::StrCat("job \"", job_id, "\" is ", StateLabel(job->state())));
  }
  JobEvent event;
  event.set_log(text);
  *event.mutable_time() = ToTimestamp(clock_->Now());
  return SaveLocked(it->second.job, {std::move(event)});
}

absl::StatusOr<Job> JobScheduler::Cancel(const std::string& job_id) {
  Answers answers;
  absl::StatusOr<Job> out;
  {
    absl::MutexLock lock(&mu_);
    out = CancelLocked(job_id, &answers);
  }
  for (auto& answer : answers) answer();
  WriteEndingManifests();
  if (out.ok() && IsSweepParent(*out) && !IsFinal(out->state())) {
    absl::StatusOr<Job> stored = store_->GetJob(job_id);  // it may have ended just now, its manifest written above
    if (stored.ok()) return stored;
  }
  return out;
}

absl::StatusOr<Job> JobScheduler::CancelLocked(const std::string& job_id, Answers* answers) {
  auto it = active_.find(job_id);
  if (it == active_.end()) return store_->GetJob(job_id);  // final already (or NOT_FOUND)
  ActiveJob& active = it->second;
  if (IsSweepParent(active.job)) return CancelSweepLocked(job_id, answers);
  if (!active.job.deduplicated_from().empty()) {  // a follower has no worker: it ends now, its leader goes on
    absl::Status status =
        FinishLocked(job_id, JobState::JOB_STATE_CANCELLED,
                     absl::StrCat("cancelled (job ", active.job.deduplicated_from(), ", which it followed, goes on)"),
                     nullptr);
    if (!status.ok()) return status;
    return store_->GetJob(job_id);
  }
  if (active.job.state() == JobState::JOB_STATE_QUEUED) {
    absl::Status status = FinishLocked(job_id, JobState::JOB_STATE_CANCELLED, "cancelled before it started", nullptr);
    if (!status.ok()) return status;
    return store_->GetJob(job_id);
  }
  if (!active.cancel_requested) {
    active.cancel_requested = true;
    active.cancel_deadline = clock_->Now() + options_.cancel_grace;
    JobEvent event;
    event.set_log(absl::StrCat("cancel requested; worker ", active.job.worker_id(), " is being stopped"));
    *event.mutable_time() = ToTimestamp(clock_->Now());
    absl::Status status = SaveLocked(active.job, {event});
    if (!status.ok()) return status;
    log::Get("scheduler")->info("job={} cancel requested worker={}", job_id, ForLog(active.job.worker_id()));
  }
  DispatchLocked(answers);
  return active.job;
}

absl::Status JobScheduler::FinishLocked(const std::string& job_id, JobState state, const std::string& error,
                                        const quark::v1::JobResult* result) {
  auto it = active_.find(job_id);
  if (it == active_.end()) return absl::NotFoundError(absl::StrCat("job ", job_id, " is not active"));
  ActiveJob& active = it->second;
  Job& job = active.job;
  JobState from = job.state();
  if (!job.deduplicated_from().empty()) {
    auto leader = followers_.find(job.deduplicated_from());
    if (leader != followers_.end()) leader->second.erase(job_id);
  }
  queue_.erase(KeyOf(active));
  if (!active.lease_id.empty()) ReleaseLeaseLocked(active.lease_id);
  absl::Time now = clock_->Now();
  job.set_state(state);
  job.set_error(error);
  if (result != nullptr) *job.mutable_result() = *result;
  *job.mutable_finished_at() = ToTimestamp(now);
  if (job.attempts_size() > 0 && !job.attempts().rbegin()->has_ended_at()) {
    quark::v1::Attempt* attempt = job.mutable_attempts(job.attempts_size() - 1);
    *attempt->mutable_ended_at() = ToTimestamp(now);
    if (state != JobState::JOB_STATE_SUCCEEDED) attempt->set_error(error);
  }
  // #36: a parent's manifest is written before its end is stored, so whoever sees the parent ended can read it; but
  // not under the lock (an s3 endpoint that is down would hold it through the client's retries): the parent leaves
  // active_ here and WriteEndingManifests, run by the caller once it let go of the lock, writes it and stores the end.
  if (IsSweepParent(job) && options_.sweep_manifests != nullptr) {
    BeginParentEndLocked(it, from, result != nullptr);
    return absl::OkStatus();
  }
  return StoreEndLocked(it, from, result, {});
}

absl::Status JobScheduler::StoreEndLocked(std::map<std::string, ActiveJob>::iterator it, JobState from,
                                          const quark::v1::JobResult* result, std::vector<JobEvent> events) {
  const std::string job_id = it->first;
  Job& job = it->second.job;
  const JobState state = job.state();
  events.push_back(StateEventLocked(job));
  absl::Status status = SaveLocked(job, std::move(events));
  CountStateLocked(job, from);
  std::string preset = PresetLabel(job.spec());
  if (metrics_ != nullptr) {
    metrics_->jobs_finished.WithLabels({StateLabel(state), preset}).Increment();
    if (!job.tenant().empty()) metrics_->tenant_jobs_finished.WithLabels({job.tenant(), StateLabel(state)}).Increment();
    if (job.has_started_at()) {
      metrics_->job_duration.WithLabels({StateLabel(state), preset})
          .Observe(absl::ToDoubleSeconds(FromTimestamp(job.finished_at()) - FromTimestamp(job.started_at())));
    }
    if (result != nullptr) {
      for (const auto& artifact : result->artifacts()) metrics_->uploaded_bytes.Increment(artifact.size_bytes());
    }
  }
  log::Get("scheduler")->info("job={} {} {}", job_id, StateLabel(state), ForLog(job.error()));
  Job ended = followers_.count(job_id) ? job : Job();
  Job child = job.parent_id().empty() ? Job() : job;
  active_.erase(it);
  if (!ended.id().empty()) FollowLeaderLocked(ended);
  if (!child.id().empty()) SweepChildEndedLocked(child);
  return status;
}

void JobScheduler::RequeueOrFailLocked(ActiveJob& active, const std::string& reason) {
  Job& job = active.job;
  absl::Time now = clock_->Now();
  if (job.attempts_size() > 0 && !job.attempts().rbegin()->has_ended_at()) {
    quark::v1::Attempt* attempt = job.mutable_attempts(job.attempts_size() - 1);
    *attempt->mutable_ended_at() = ToTimestamp(now);
    attempt->set_error(reason);
  }
  active.lease_id.clear();
  if (job.attempts_size() >= job.spec().max_attempts()) {
    std::vector<std::string> reasons;
    for (const auto& attempt : job.attempts()) {
      reasons.push_back(absl::StrCat("attempt ", attempt.number(), " on ", attempt.worker_id(), ": ", attempt.error()));
    }
    FinishLocked(job.id(), JobState::JOB_STATE_FAILED,
                 absl::StrCat("failed after ", job.attempts_size(), " attempts: ", absl::StrJoin(reasons, "; ")),
                 nullptr)
        .IgnoreError();  // logged by SaveLocked
    return;
  }
  JobState from = job.state();
  job.set_state(JobState::JOB_STATE_QUEUED);
  job.clear_worker_id();
  SaveLocked(job, {StateEventLocked(job)}).IgnoreError();
  CountStateLocked(job, from);
  queue_.insert(KeyOf(active));
  FollowLeaderLocked(job);
  log::Get("scheduler")->warn("job={} requeued after attempt {}: {}", job.id(), job.attempts_size(), ForLog(reason));
}

}  // namespace quark::server
