// The worker side of ReplicatedScheduler: registration, leases (claims from the shared queue, parked Lease calls
// and their dispatch), heartbeats, progress, completion and lease expiry.
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/log.h"
#include "server/log_text.h"
#include "server/scheduler/job_scheduler.h"
#include "server/scheduler/replicated_scheduler.h"
#include "server/scheduler/replicated_transitions.h"
#include "server/scheduler/result_check.h"
#include "server/scheduler/time_util.h"
#include "server/scheduler/worker_fit.h"

namespace quark::server {

// The row transitions shared by replicated_scheduler.cc and replicated_scheduler_lease.cc.
using replicated::At;
using replicated::StateEvent;
using replicated::ClearLease;
using replicated::Finish;
using replicated::FinishStopped;
using replicated::RequeueOrFail;
using replicated::kStaleBatch;
using quark::v1::Job;
using quark::v1::JobEvent;
using quark::v1::JobState;
using quark::v1::internal::HeartbeatResponse;
using quark::v1::internal::LeaseResponse;
using quark::v1::internal::RegisterRequest;
using quark::v1::internal::RegisterResponse;

namespace {
constexpr auto kDispatchPoll = std::chrono::milliseconds(500);  // parked polls retry at least this often
}  // namespace

RegisterResponse ReplicatedScheduler::Register(const RegisterRequest& request) {
  const std::string& worker_id = request.worker_id();
  {
    absl::MutexLock lock(&mu_);
    Worker& worker = workers_[worker_id];
    worker.slots = std::max(1, request.slots());
    worker.capacity = CapacityOf(request);
    worker.last_seen = clock_->Now();
  }
  // A worker process registers once; a Register under an id that holds leases is a restarted process, through
  // whichever replica: the old process's leases are gone with it.
  std::string reason = absl::StrCat("worker ", worker_id, " restarted (registered again)");
  absl::StatusOr<std::vector<LeaseRow>> released = queue_->UpdateStaleRows(
      SharedJobQueue::Stale::kHeldByWorker, worker_id, kStaleBatch,
      [&](int64_t now_ms, LeaseRow* row, std::vector<JobEvent>* events) {
        RequeueOrFail(now_ms, row, reason, events);
        return true;
      });
  if (released.ok()) {
    for (const LeaseRow& row : *released) {
      AfterWrite(row, JobState::JOB_STATE_RUNNING);
      if (metrics_ != nullptr) metrics_->leases_lost.WithLabels({"worker_restarted"}).Increment();
    }
  }
  const WorkerCapacity capacity = CapacityOf(request);
  log::Get("scheduler")->info("job=- worker={} registered slots={} gpus={} host_memory={} gpu_memory={} host={} "
                              "version={}",
                              ForLog(worker_id), std::max(1, request.slots()), capacity.gpus,
                              capacity.host_memory_bytes, capacity.gpu_memory_bytes, ForLog(request.hostname()),
                              ForLog(request.version()));
  Wake();
  RegisterResponse response;
  response.set_heartbeat_interval_ms(absl::ToInt64Milliseconds(options_.heartbeat_interval));
  response.set_lease_timeout_ms(absl::ToInt64Milliseconds(options_.lease_timeout));
  return response;
}

void ReplicatedScheduler::NoteMemoryPassOvers(const std::string& worker_id, const WorkerCapacity& capacity,
                                              const std::vector<MemoryPassOver>& passed_over) {
  for (const MemoryPassOver& pass : passed_over) {
    const Shortfall shortfall = ShortfallOf(capacity, pass.demand);
    if (shortfall != Shortfall::kHostMemory && shortfall != Shortfall::kGpuMemory) continue;
    if (metrics_ != nullptr) metrics_->lease_memory_skips.WithLabels({MemoryLabel(shortfall)}).Increment();
    {
      absl::MutexLock lock(&mu_);
      // Bounded: past kMaxMemoryNoted jobs the set starts over, and a job still waiting may be logged once more.
      if (memory_noted_.size() >= kMaxMemoryNoted) memory_noted_.clear();
      if (!memory_noted_.insert(pass.job_id).second) continue;  // once per job (on this replica), not per poll
    }
    const std::string text = MemoryWaitText(pass.demand, capacity, shortfall, ForLog(worker_id));
    log::Get("scheduler")->info("job={} {}", pass.job_id, text);
    // Also in the job's events, so that WatchJob / quarkctl watch say why the job is still queued.
    absl::Status noted = AppendLog(pass.job_id, text);
    if (!noted.ok()) {
      log::Get("scheduler")->warn("job={} wait note not stored: {}", pass.job_id, ForLog(noted.ToString()));
    }
  }
}

bool ReplicatedScheduler::MayLeaseLocked(const std::string& worker_id) {
  return !shut_down_ && !leasing_stopped_ && !draining_.count(worker_id);
}

int ReplicatedScheduler::SlotsLocked(const std::string& worker_id) {
  auto it = workers_.find(worker_id);
  return it == workers_.end() ? 1 : it->second.slots;
}

LeaseResponse ReplicatedScheduler::Claim(const std::string& worker_id, int slots) {
  LeaseResponse response;
  std::string lease_id = NewId("lease-");
  int64_t ttl_ms = absl::ToInt64Milliseconds(options_.lease_timeout);
  std::map<std::string, int64_t> limits;
  WorkerCapacity capacity;
  {
    absl::MutexLock lock(&mu_);
    limits = max_running_;
    auto worker = workers_.find(worker_id);
    if (worker != workers_.end()) capacity = worker->second.capacity;
  }
  std::vector<MemoryPassOver> passed_over;
  absl::StatusOr<std::optional<LeaseRow>> claimed =
      queue_->ClaimNext(worker_id, slots, [&](int64_t now_ms, LeaseRow* row, std::vector<JobEvent>* events) {
        Job& job = row->job;
        job.set_state(JobState::JOB_STATE_RUNNING);
        job.set_worker_id(worker_id);
        if (!job.has_started_at()) *job.mutable_started_at() = ToTimestamp(At(now_ms));
        quark::v1::Attempt* attempt = job.add_attempts();
        attempt->set_number(job.attempts_size());
        attempt->set_worker_id(worker_id);
        *attempt->mutable_started_at() = ToTimestamp(At(now_ms));
        row->lease_id = lease_id;
        row->lease_worker = worker_id;
        row->lease_expires_ms = now_ms + ttl_ms;
        row->cancel_requested = false;
        row->cancel_deadline_ms = 0;
        events->push_back(StateEvent(job, now_ms));
        return true;
      }, limits, capacity, &passed_over);
  NoteMemoryPassOvers(worker_id, capacity, passed_over);
  if (!claimed.ok()) {
    log::Get("scheduler")->warn("job=- worker={} lease not taken: {}", ForLog(worker_id),
                                ForLog(claimed.status().ToString()));
    return response;
  }
  if (!claimed->has_value()) return response;
  const LeaseRow& row = **claimed;
  {
    absl::MutexLock lock(&mu_);
    local_leases_[lease_id] = row.job.id();
  }
  AfterWrite(row, JobState::JOB_STATE_QUEUED);
  if (metrics_ != nullptr && row.job.attempts_size() == 1) {
    metrics_->queue_wait.WithLabels({PresetLabel(row.job.spec())})
        .Observe(absl::ToDoubleSeconds(FromTimestamp(row.job.started_at()) - FromTimestamp(row.job.created_at())));
  }
  response.set_lease_id(lease_id);
  *response.mutable_job() = row.job;
  response.set_attempt(row.job.attempts_size());
  log::Get("scheduler")->info("job={} leased worker={} attempt={} lease={}", row.job.id(), ForLog(worker_id),
                              row.job.attempts_size(), lease_id);
  return response;
}

void ReplicatedScheduler::HandBack(const std::string& lease_id) {
  absl::StatusOr<LeaseRow> row =
      queue_->UpdateLeasedRow(lease_id, [](int64_t now_ms, LeaseRow* r, std::vector<JobEvent>* events) {
        Job& job = r->job;
        job.mutable_attempts()->RemoveLast();
        if (job.attempts_size() == 0) job.clear_started_at();
        job.set_state(JobState::JOB_STATE_QUEUED);
        job.clear_worker_id();
        ClearLease(r);
        events->push_back(StateEvent(job, now_ms));
        return true;
      });
  ForgetLease(lease_id);
  if (row.ok()) AfterWrite(*row, JobState::JOB_STATE_RUNNING);
  Wake();
}

uint64_t ReplicatedScheduler::Lease(const std::string& worker_id, absl::Duration wait, LeaseCallback done) {
  int slots = 1;
  bool allowed;
  {
    absl::MutexLock lock(&mu_);
    workers_[worker_id].last_seen = clock_->Now();
    slots = SlotsLocked(worker_id);
    allowed = MayLeaseLocked(worker_id);
  }
  if (!allowed) {
    done(LeaseResponse());
    return 0;
  }
  uint64_t wakes = wakes_.load();
  LeaseResponse response = Claim(worker_id, slots);
  if (!response.lease_id().empty() || wait <= absl::ZeroDuration()) {
    done(std::move(response));
    return 0;
  }
  uint64_t wait_id;
  {
    absl::MutexLock lock(&mu_);
    wait_id = next_wait_id_++;
    waiters_[wait_id] = Waiter{worker_id, clock_->Now() + wait, std::move(done)};
  }
  if (wakes_.load() != wakes) Wake();  // a job came while we claimed: look again
  return wait_id;
}

void ReplicatedScheduler::CancelLeaseWait(uint64_t wait_id) {
  LeaseCallback done;
  {
    absl::MutexLock lock(&mu_);
    auto it = waiters_.find(wait_id);
    if (it == waiters_.end()) return;
    if (it->second.claiming) {
      it->second.abandoned = true;  // the dispatcher answers it (and hands back any job it claimed)
      return;
    }
    done = std::move(it->second.done);
    waiters_.erase(it);
  }
  done(LeaseResponse());
}

void ReplicatedScheduler::DispatchLoop() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(dispatch_mu_);
      dispatch_cv_.wait_for(lock, kDispatchPoll, [&] { return dispatch_requested_ || dispatch_stop_; });
      if (dispatch_stop_) return;
      dispatch_requested_ = false;
    }
    DispatchOnce();
  }
}

void ReplicatedScheduler::DispatchOnce() {
  std::vector<uint64_t> ids;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [wait_id, waiter] : waiters_) ids.push_back(wait_id);
  }
  for (uint64_t wait_id : ids) {
    std::string worker_id;
    int slots = 1;
    {
      absl::MutexLock lock(&mu_);
      auto it = waiters_.find(wait_id);
      if (it == waiters_.end() || !MayLeaseLocked(it->second.worker_id)) continue;
      it->second.claiming = true;
      worker_id = it->second.worker_id;
      slots = SlotsLocked(worker_id);
    }
    LeaseResponse response = Claim(worker_id, slots);
    LeaseCallback done;
    bool abandoned = false;
    {
      absl::MutexLock lock(&mu_);
      auto it = waiters_.find(wait_id);
      it->second.claiming = false;
      abandoned = it->second.abandoned;
      if (!response.lease_id().empty() || abandoned) {
        done = std::move(it->second.done);
        waiters_.erase(it);
      }
    }
    if (abandoned && !response.lease_id().empty()) {
      log::Get("scheduler")->info("job={} worker={} went away before its lease was delivered; requeued",
                                  response.job().id(), ForLog(worker_id));
      HandBack(response.lease_id());
      response = LeaseResponse();
    }
    if (done) done(std::move(response));
    else if (response.lease_id().empty()) break;  // nothing free for this worker: the queue is empty (or held)
  }
}

HeartbeatResponse ReplicatedScheduler::Heartbeat(const std::string& worker_id, const std::string& lease_id) {
  {
    absl::MutexLock lock(&mu_);
    if (auto w = workers_.find(worker_id); w != workers_.end()) w->second.last_seen = clock_->Now();
  }
  HeartbeatResponse response;
  absl::StatusOr<bool> cancel = queue_->RenewLease(lease_id, absl::ToInt64Milliseconds(options_.lease_timeout));
  if (cancel.ok()) {
    response.set_cancel(*cancel);
  } else if (absl::IsNotFound(cancel.status())) {
    response.set_lease_lost(true);
    ForgetLease(lease_id);
  } else {
    // The database is unreachable: the lease is neither renewed nor known lost; the worker keeps going.
    log::Get("scheduler")->warn("job=- worker={} heartbeat not stored: {}", ForLog(worker_id),
                                ForLog(cancel.status().ToString()));
  }
  return response;
}

absl::StatusOr<bool> ReplicatedScheduler::ReportProgress(const quark::v1::internal::ReportProgressRequest& request) {
  int64_t ttl_ms = absl::ToInt64Milliseconds(options_.lease_timeout);
  absl::StatusOr<LeaseRow> row = queue_->UpdateLeasedRow(
      request.lease_id(), [&](int64_t now_ms, LeaseRow* r, std::vector<JobEvent>* events) {
        r->lease_expires_ms = now_ms + ttl_ms;  // progress is a sign of life too
        if (request.has_progress()) {
          *r->job.mutable_progress() = request.progress();
          JobEvent& event = events->emplace_back();
          *event.mutable_progress() = request.progress();
          *event.mutable_time() = ToTimestamp(At(now_ms));
        }
        if (!request.log().empty()) {
          JobEvent& event = events->emplace_back();
          event.set_log(request.log());
          *event.mutable_time() = ToTimestamp(At(now_ms));
        }
        return true;
      });
  if (!row.ok()) return row.status();
  if (!request.log().empty()) {
    log::Get("worker")->info("job={} worker={} {}", row->job.id(), ForLog(row->lease_worker), ForLog(request.log()));
  }
  AfterWrite(*row, JobState::JOB_STATE_RUNNING);
  return row->cancel_requested;
}

absl::Status ReplicatedScheduler::Complete(const quark::v1::internal::CompleteRequest& request) {
  absl::Status forged;
  absl::StatusOr<LeaseRow> row = queue_->UpdateLeasedRow(
      request.lease_id(), [&](int64_t now_ms, LeaseRow* r, std::vector<JobEvent>* events) {
        forged = absl::OkStatus();
        if (r->cancel_requested || request.cancelled()) {
          FinishStopped(now_ms, r, "", events);
        } else if (request.handed_back()) {
          RequeueOrFail(now_ms, r, request.error().empty() ? "worker handed the job back" : request.error(), events);
        } else if (forged = CheckResultUris(r->job, request.result()); !forged.ok()) {
          // As JobScheduler: a result outside the job's output prefix is never stored; the job fails.
          Finish(now_ms, r, JobState::JOB_STATE_FAILED, ForgedResultError(r->lease_worker, forged), nullptr, events);
        } else if (request.success()) {
          Finish(now_ms, r, JobState::JOB_STATE_SUCCEEDED, "", &request.result(), events);
        } else {
          // A worker's own failure is final, as in JobScheduler: it would fail again.
          std::string error =
              request.error().empty() ? "worker reported failure without a message" : request.error();
          Finish(now_ms, r, JobState::JOB_STATE_FAILED, error, &request.result(), events);
        }
        return true;
      });
  ForgetLease(request.lease_id());
  if (!row.ok()) return AnswerRepeatedCompletion(*store_, request, row.status());
  AfterWrite(*row, JobState::JOB_STATE_RUNNING);
  if (metrics_ != nullptr && row->job.state() == JobState::JOB_STATE_SUCCEEDED) {
    for (const auto& artifact : row->job.result().artifacts()) metrics_->uploaded_bytes.Increment(artifact.size_bytes());
  }
  log::Get("scheduler")->info("job={} {} {}", row->job.id(), StateLabel(row->job.state()), ForLog(row->job.error()));
  Wake();
  return forged;
}

void ReplicatedScheduler::ForgetLease(const std::string& lease_id) {
  absl::MutexLock lock(&mu_);
  local_leases_.erase(lease_id);
}

void ReplicatedScheduler::Expire() {
  std::string timeout = absl::FormatDuration(options_.lease_timeout);
  absl::StatusOr<std::vector<LeaseRow>> expired = queue_->UpdateStaleRows(
      SharedJobQueue::Stale::kLeaseExpired, "", kStaleBatch,
      [&](int64_t now_ms, LeaseRow* row, std::vector<JobEvent>* events) {
        RequeueOrFail(now_ms, row,
                      absl::StrCat("lease lost: worker ", row->lease_worker, " sent no heartbeat for ", timeout), events);
        return true;
      });
  if (expired.ok()) {
    for (const LeaseRow& row : *expired) {
      if (metrics_ != nullptr) metrics_->leases_lost.WithLabels({"expired"}).Increment();
      log::Get("scheduler")->warn("job={} lease expired: now {}", row.job.id(), StateLabel(row.job.state()));
      AfterWrite(row, JobState::JOB_STATE_RUNNING);
    }
    if (!expired->empty()) Wake();
  }
  std::string grace = absl::FormatDuration(options_.cancel_grace);
  std::vector<std::string> to_kill;
  absl::StatusOr<std::vector<LeaseRow>> overdue = queue_->UpdateStaleRows(
      SharedJobQueue::Stale::kCancelOverdue, "", kStaleBatch,
      [&](int64_t now_ms, LeaseRow* row, std::vector<JobEvent>* events) {
        to_kill.push_back(row->lease_worker);
        FinishStopped(now_ms, row, absl::StrCat("; worker ", row->lease_worker, " did not stop within ", grace,
                                                " and was stopped"),
                      events);
        return true;
      });
  if (overdue.ok()) {
    for (const LeaseRow& row : *overdue) AfterWrite(row, JobState::JOB_STATE_RUNNING);
  }
  WorkerKiller killer;
  {
    absl::MutexLock lock(&mu_);
    killer = killer_;
  }
  // Only this replica's local workers can be killed here; a remote one sees lease_lost at its next heartbeat.
  for (const std::string& worker_id : to_kill) {
    if (killer) killer(worker_id);
  }
}

}  // namespace quark::server
