// The worker side of JobScheduler: registration, leases, heartbeats, progress, completion and expiry.
#include "absl/strings/str_cat.h"
#include "core/base/log.h"
#include "server/log_text.h"
#include "server/scheduler/job_scheduler.h"
#include "server/scheduler/result_check.h"
#include "server/scheduler/time_util.h"
#include "server/scheduler/worker_fit.h"

namespace quark::server {

using quark::v1::Job;
using quark::v1::JobEvent;
using quark::v1::JobState;
using quark::v1::internal::HeartbeatResponse;
using quark::v1::internal::LeaseResponse;
using quark::v1::internal::RegisterRequest;
using quark::v1::internal::RegisterResponse;

RegisterResponse JobScheduler::Register(const RegisterRequest& request) {
  Answers answers;
  {
    absl::MutexLock lock(&mu_);
    auto it = workers_.find(request.worker_id());
    if (it != workers_.end()) {
      // The same id registering again is a new process: whatever the old one held is gone with it, its leases
      // and its parked Lease calls (answered empty now rather than handed a job on a dead connection).
      std::vector<uint64_t> stale;
      for (const auto& [wait_id, waiter] : waiters_) {
        if (waiter.worker_id == request.worker_id()) stale.push_back(wait_id);
      }
      for (uint64_t wait_id : stale) AnswerWaiterLocked(wait_id, LeaseResponse(), &answers);
      std::set<std::string> held = it->second.leases;
      for (const std::string& lease_id : held) {
        LoseLeaseLocked(lease_id, absl::StrCat("worker ", request.worker_id(), " restarted (registered again)"),
                        "worker_restarted");
      }
    }
    Worker& worker = workers_[request.worker_id()];
    worker.slots = std::max(1, request.slots());
    worker.capacity = CapacityOf(request);
    worker.last_seen = clock_->Now();
    log::Get("scheduler")->info("job=- worker={} registered slots={} gpus={} host_memory={} gpu_memory={} host={} "
                                "version={}",
                                ForLog(request.worker_id()), worker.slots, worker.capacity.gpus,
                                worker.capacity.host_memory_bytes, worker.capacity.gpu_memory_bytes,
                                ForLog(request.hostname()), ForLog(request.version()));
    DispatchLocked(&answers);
    UpdateGaugesLocked();
  }
  for (auto& answer : answers) answer();
  WriteEndingManifests();  // #36: a lost lease may have ended a sweep's last child
  RegisterResponse response;
  response.set_heartbeat_interval_ms(absl::ToInt64Milliseconds(options_.heartbeat_interval));
  response.set_lease_timeout_ms(absl::ToInt64Milliseconds(options_.lease_timeout));
  return response;
}

bool JobScheduler::HasFreeSlotLocked(const std::string& worker_id) {
  if (leasing_stopped_ || draining_.count(worker_id)) return false;
  auto it = workers_.find(worker_id);
  return it != workers_.end() && static_cast<int>(it->second.leases.size()) < it->second.slots;
}

std::set<JobScheduler::QueueKey>::iterator JobScheduler::NextRunnableLocked(const std::string& worker_id,
                                                                           const Worker& worker) {
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    ActiveJob& active = active_[std::get<2>(*it)];
    const Job& job = active.job;
    const JobDemand demand = DemandOf(job);
    const Shortfall shortfall = ShortfallOf(worker.capacity, demand);
    if (shortfall != Shortfall::kNone) {
      // Skipped, not waited on: left for a worker with the GPUs or the memory it needs, while this one goes on
      // with the jobs behind it.
      if (shortfall != Shortfall::kGpus) NoteMemorySkipLocked(active, demand, worker_id, worker, shortfall);
      continue;
    }
    const std::string& tenant = job.tenant();
    auto limit = max_running_.find(tenant);
    if (limit == max_running_.end() || limit->second <= 0) return it;
    auto counts = tenants_.find(tenant);
    if (counts == tenants_.end() || counts->second.running < limit->second) return it;
  }
  return queue_.end();
}

bool JobScheduler::AssignLocked(const std::string& worker_id, LeaseResponse* response) {
  if (queue_.empty() || !HasFreeSlotLocked(worker_id)) return false;
  auto next = NextRunnableLocked(worker_id, workers_[worker_id]);
  // Every queued job's tenant is at its running limit, or every one asks for more GPUs or memory than the worker
  // has.
  if (next == queue_.end()) return false;
  QueueKey key = *next;
  ActiveJob& active = active_[std::get<2>(key)];
  Job& job = active.job;
  absl::Time now = clock_->Now();
  std::string lease_id = NewId("lease-");
  JobState from = job.state();
  int attempt_number = job.attempts_size() + 1;
  job.set_state(JobState::JOB_STATE_RUNNING);
  job.set_worker_id(worker_id);
  bool first_start = !job.has_started_at();
  if (first_start) *job.mutable_started_at() = ToTimestamp(now);
  quark::v1::Attempt* attempt = job.add_attempts();
  attempt->set_number(attempt_number);
  attempt->set_worker_id(worker_id);
  *attempt->mutable_started_at() = ToTimestamp(now);
  if (!SaveLocked(job, {StateEventLocked(job)}).ok()) {
    // Not durable, so not handed out: undo and leave the job queued.
    job.mutable_attempts()->RemoveLast();
    job.set_state(from);
    job.clear_worker_id();
    return false;
  }
  queue_.erase(key);
  CountStateLocked(job, from);
  active.lease_id = lease_id;
  LeaseState& lease = leases_[lease_id];
  lease.job_id = job.id();
  lease.worker_id = worker_id;
  lease.attempt = attempt_number;
  lease.deadline = now + options_.lease_timeout;
  workers_[worker_id].leases.insert(lease_id);
  if (first_start && metrics_ != nullptr) {
    metrics_->queue_wait.WithLabels({PresetLabel(job.spec())})
        .Observe(absl::ToDoubleSeconds(now - FromTimestamp(job.created_at())));
  }
  response->set_lease_id(lease_id);
  *response->mutable_job() = job;
  response->set_attempt(attempt_number);
  log::Get("scheduler")->info("job={} leased worker={} attempt={} lease={}", job.id(), ForLog(worker_id), attempt_number,
                              lease_id);
  FollowLeaderLocked(job);
  return true;
}

void JobScheduler::NoteMemorySkipLocked(ActiveJob& active, const JobDemand& demand, const std::string& worker_id,
                                        const Worker& worker, Shortfall shortfall) {
  if (metrics_ != nullptr) metrics_->lease_memory_skips.WithLabels({MemoryLabel(shortfall)}).Increment();
  if (active.memory_wait_noted) return;  // once per job, not once per poll
  active.memory_wait_noted = true;
  const std::string text = MemoryWaitText(demand, worker.capacity, shortfall, ForLog(worker_id));
  log::Get("scheduler")->info("job={} {}", active.job.id(), text);
  // Also in the job's events, so that WatchJob / quarkctl watch say why the job is still queued.
  JobEvent event;
  event.set_log(text);
  *event.mutable_time() = ToTimestamp(clock_->Now());
  SaveLocked(active.job, {std::move(event)}).IgnoreError();  // advisory; SaveLocked logs a failed write
}

void JobScheduler::AnswerWaiterLocked(uint64_t wait_id, LeaseResponse response, Answers* answers) {
  auto it = waiters_.find(wait_id);
  if (it == waiters_.end()) return;
  LeaseCallback done = std::move(it->second.done);
  waiters_.erase(it);
  answers->push_back([done = std::move(done), response = std::move(response)]() mutable { done(std::move(response)); });
}

void JobScheduler::DispatchLocked(Answers* answers) {
  for (auto it = waiters_.begin(); it != waiters_.end() && !queue_.empty();) {
    uint64_t wait_id = it->first;
    LeaseResponse response;
    bool assigned = AssignLocked(it->second.worker_id, &response);
    ++it;  // AnswerWaiterLocked erases the current entry
    if (assigned) AnswerWaiterLocked(wait_id, std::move(response), answers);
  }
}

uint64_t JobScheduler::Lease(const std::string& worker_id, absl::Duration wait, LeaseCallback done) {
  Answers answers;
  uint64_t wait_id = 0;
  {
    absl::MutexLock lock(&mu_);
    absl::Time now = clock_->Now();
    Worker& worker = workers_[worker_id];  // an unregistered caller is taken as a one-slot worker
    worker.last_seen = now;
    LeaseResponse response;
    if (shut_down_ || leasing_stopped_ || AssignLocked(worker_id, &response) || wait <= absl::ZeroDuration()) {
      answers.push_back([done = std::move(done), response = std::move(response)]() mutable {
        done(std::move(response));
      });
    } else {
      wait_id = next_wait_id_++;
      waiters_[wait_id] = Waiter{worker_id, now + wait, std::move(done)};
    }
    UpdateGaugesLocked();
  }
  for (auto& answer : answers) answer();
  return wait_id;
}

void JobScheduler::CancelLeaseWait(uint64_t wait_id) {
  Answers answers;
  {
    absl::MutexLock lock(&mu_);
    AnswerWaiterLocked(wait_id, LeaseResponse(), &answers);
  }
  for (auto& answer : answers) answer();
}

HeartbeatResponse JobScheduler::Heartbeat(const std::string& worker_id, const std::string& lease_id) {
  absl::MutexLock lock(&mu_);
  HeartbeatResponse response;
  absl::Time now = clock_->Now();
  if (auto w = workers_.find(worker_id); w != workers_.end()) w->second.last_seen = now;
  auto it = leases_.find(lease_id);
  if (it == leases_.end() || it->second.worker_id != worker_id) {
    response.set_lease_lost(true);
    return response;
  }
  it->second.deadline = now + options_.lease_timeout;
  response.set_cancel(active_[it->second.job_id].cancel_requested);
  return response;
}

void JobScheduler::ObservePhaseLocked(LeaseState& lease, const std::string& phase) {
  if (phase == lease.phase) return;
  absl::Time now = clock_->Now();
  if (!lease.phase.empty() && metrics_ != nullptr) {
    metrics_->phase_duration.WithLabels({lease.phase}).Observe(absl::ToDoubleSeconds(now - lease.phase_started));
  }
  lease.phase = phase;
  lease.phase_started = now;
}

absl::StatusOr<bool> JobScheduler::ReportProgress(const quark::v1::internal::ReportProgressRequest& request) {
  absl::MutexLock lock(&mu_);
  auto it = leases_.find(request.lease_id());
  if (it == leases_.end()) {
    return absl::NotFoundError(absl::StrCat("lease_id: \"", request.lease_id(), "\" is not held (lost or completed)"));
  }
  LeaseState& lease = it->second;
  absl::Time now = clock_->Now();
  lease.deadline = now + options_.lease_timeout;  // progress is a sign of life too
  ActiveJob& active = active_[lease.job_id];
  std::vector<JobEvent> events;
  if (request.has_progress()) {
    ObservePhaseLocked(lease, request.progress().phase());
    *active.job.mutable_progress() = request.progress();
    JobEvent& event = events.emplace_back();
    *event.mutable_progress() = request.progress();
    *event.mutable_time() = ToTimestamp(now);
  }
  if (!request.log().empty()) {
    JobEvent& event = events.emplace_back();
    event.set_log(request.log());
    *event.mutable_time() = ToTimestamp(now);
    log::Get("worker")->info("job={} worker={} {}", lease.job_id, ForLog(lease.worker_id), ForLog(request.log()));
  }
  if (!events.empty()) {
    absl::Status status = SaveLocked(active.job, std::move(events));
    if (!status.ok()) return status;
  }
  return active.cancel_requested;
}

absl::Status JobScheduler::Complete(const quark::v1::internal::CompleteRequest& request) {
  Answers answers;
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    auto it = leases_.find(request.lease_id());
    if (it == leases_.end()) {
      return AnswerRepeatedCompletion(
          *store_, request,
          absl::NotFoundError(absl::StrCat("lease_id: \"", request.lease_id(), "\" is not held (lost or completed)")));
    }
    ObservePhaseLocked(it->second, "");
    std::string job_id = it->second.job_id;
    ActiveJob& active = active_[job_id];
    if (active.cancel_requested || request.cancelled()) {
      auto [state, error] = StopOutcome(active, "");
      status = FinishLocked(job_id, state, error, nullptr);
    } else if (request.handed_back()) {
      // A worker shutting down gives its job back: requeued (this attempt counts), not failed.
      ReleaseLeaseLocked(request.lease_id());
      RequeueOrFailLocked(active, request.error().empty() ? "worker handed the job back" : request.error());
    } else if (absl::Status forged = CheckResultUris(active.job, request.result()); !forged.ok()) {
      // A result naming files outside the job's output prefix is never stored: the job fails, the worker is told.
      FinishLocked(job_id, JobState::JOB_STATE_FAILED, ForgedResultError(it->second.worker_id, forged), nullptr)
          .IgnoreError();
      status = forged;
    } else if (request.success()) {
      status = FinishLocked(job_id, JobState::JOB_STATE_SUCCEEDED, "", &request.result());
    } else {
      // A worker's own failure (bad model, bad config, export error) is not retried: it would fail again.
      std::string error = request.error().empty() ? "worker reported failure without a message" : request.error();
      status = FinishLocked(job_id, JobState::JOB_STATE_FAILED, error, &request.result());
    }
    DispatchLocked(&answers);
    UpdateGaugesLocked();
  }
  for (auto& answer : answers) answer();
  WriteEndingManifests();  // #36: this child may have been its sweep's last
  return status;
}

void JobScheduler::ReleaseLeaseLocked(std::string lease_id) {
  auto it = leases_.find(lease_id);
  if (it == leases_.end()) return;
  if (auto w = workers_.find(it->second.worker_id); w != workers_.end()) w->second.leases.erase(lease_id);
  if (auto a = active_.find(it->second.job_id); a != active_.end()) a->second.lease_id.clear();
  leases_.erase(it);
}

void JobScheduler::LoseLeaseLocked(const std::string& lease_id, const std::string& reason,
                                   const std::string& metric_reason) {
  auto it = leases_.find(lease_id);
  if (it == leases_.end()) return;
  std::string job_id = it->second.job_id;
  if (metrics_ != nullptr) metrics_->leases_lost.WithLabels({metric_reason}).Increment();
  ActiveJob& active = active_[job_id];
  if (active.cancel_requested) {
    auto [state, error] = StopOutcome(active, "");
    FinishLocked(job_id, state, error, nullptr).IgnoreError();
    return;
  }
  ReleaseLeaseLocked(lease_id);
  RequeueOrFailLocked(active, reason);
}

void JobScheduler::ExpireLocked(absl::Time now, Answers* answers, std::vector<std::string>* to_kill) {
  ExpireDeadlinesLocked(now);
  std::vector<std::pair<std::string, std::string>> expired;
  for (const auto& [lease_id, lease] : leases_) {
    if (lease.deadline <= now) expired.emplace_back(lease_id, lease.worker_id);
  }
  for (const auto& [lease_id, worker_id] : expired) {
    LoseLeaseLocked(lease_id,
                    absl::StrCat("lease lost: worker ", worker_id, " sent no heartbeat for ",
                                 absl::FormatDuration(options_.lease_timeout)),
                    "expired");
  }
  std::vector<std::pair<std::string, std::string>> overdue;
  for (const auto& [job_id, active] : active_) {
    if (active.cancel_requested && !active.lease_id.empty() && active.cancel_deadline <= now) {
      overdue.emplace_back(job_id, active.job.worker_id());
    }
  }
  for (const auto& [job_id, worker_id] : overdue) {
    to_kill->push_back(worker_id);
    auto [state, error] = StopOutcome(active_[job_id], absl::StrCat("; worker ", worker_id, " did not stop within ",
                                                                    absl::FormatDuration(options_.cancel_grace),
                                                                    " and was stopped"));
    FinishLocked(job_id, state, error, nullptr).IgnoreError();
  }
  std::vector<uint64_t> timed_out;
  for (const auto& [wait_id, waiter] : waiters_) {
    if (waiter.deadline <= now) timed_out.push_back(wait_id);
  }
  for (uint64_t wait_id : timed_out) AnswerWaiterLocked(wait_id, LeaseResponse(), answers);
  // Forget workers that went silent without a job or a parked poll (a remote worker that was switched off).
  std::set<std::string> waiting;
  for (const auto& [wait_id, waiter] : waiters_) waiting.insert(waiter.worker_id);
  for (auto it = workers_.begin(); it != workers_.end();) {
    bool silent = now - it->second.last_seen > options_.lease_timeout;
    it = silent && it->second.leases.empty() && !waiting.count(it->first) ? workers_.erase(it) : std::next(it);
  }
}

void JobScheduler::Tick() {
  Answers answers;
  std::vector<std::string> to_kill;
  WorkerKiller killer;
  {
    absl::MutexLock lock(&mu_);
    ExpireLocked(clock_->Now(), &answers, &to_kill);
    DispatchLocked(&answers);
    UpdateGaugesLocked();
    killer = killer_;
  }
  for (auto& answer : answers) answer();
  WriteEndingManifests();  // #36: an expired lease or deadline may have ended a sweep's last child
  for (const std::string& worker_id : to_kill) {
    log::Get("scheduler")->warn("job=- worker={} did not stop a cancelled job; killing it", ForLog(worker_id));
    if (killer) killer(worker_id);
  }
}

void JobScheduler::StopLeasing() {
  Answers answers;
  {
    absl::MutexLock lock(&mu_);
    leasing_stopped_ = true;
    std::vector<uint64_t> ids;
    for (const auto& [wait_id, waiter] : waiters_) ids.push_back(wait_id);
    for (uint64_t wait_id : ids) AnswerWaiterLocked(wait_id, LeaseResponse(), &answers);
  }
  for (auto& answer : answers) answer();
}

void JobScheduler::Shutdown() {
  Answers answers;
  {
    absl::MutexLock lock(&mu_);
    shut_down_ = true;
    std::vector<uint64_t> ids;
    for (const auto& [wait_id, waiter] : waiters_) ids.push_back(wait_id);
    for (uint64_t wait_id : ids) AnswerWaiterLocked(wait_id, LeaseResponse(), &answers);
  }
  for (auto& answer : answers) answer();
}

}  // namespace quark::server
