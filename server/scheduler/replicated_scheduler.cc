#include "server/scheduler/replicated_scheduler.h"

#include <chrono>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/log.h"
#include "server/log_text.h"
#include "server/scheduler/job_scheduler.h"
#include "server/scheduler/result_check.h"
#include "server/scheduler/time_util.h"
#include "server/scheduler/worker_fit.h"

namespace quark::server {
namespace {

using quark::v1::Job;
using quark::v1::JobEvent;
using quark::v1::JobState;
using quark::v1::internal::HeartbeatResponse;
using quark::v1::internal::LeaseResponse;
using quark::v1::internal::RegisterRequest;
using quark::v1::internal::RegisterResponse;

constexpr int kStaleBatch = 100;
constexpr int kGaugeTicks = 10;                                       // counts read every 10th tick (~1 s)
constexpr auto kDispatchPoll = std::chrono::milliseconds(500);        // parked polls retry at least this often

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

// The same transitions as JobScheduler::FinishLocked, on a locked row.
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

// How a job whose stop was asked for ends (JobScheduler::StopOutcome): FAILED when SweepDeadlines asked for it
// (it leaves the deadline error in the running job), else CANCELLED.
void FinishStopped(int64_t now_ms, LeaseRow* row, const std::string& detail, std::vector<JobEvent>* events) {
  if (absl::StartsWith(row->job.error(), "DEADLINE_EXCEEDED")) {
    return Finish(now_ms, row, JobState::JOB_STATE_FAILED, absl::StrCat(row->job.error(), detail), nullptr, events);
  }
  Finish(now_ms, row, JobState::JOB_STATE_CANCELLED, absl::StrCat("cancelled", detail), nullptr, events);
}

// The same transitions as JobScheduler::RequeueOrFailLocked.
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
    if (*queued >= options.max_queued_jobs) {
      if (!request_id.empty()) {
        absl::StatusOr<StoredJob> existing = store_->FindByRequestId(options.tenant, request_id);
        if (existing.ok()) return existing->job;
      }
      return absl::ResourceExhaustedError(absl::StrCat("tenant ", options.tenant, ": quota max_queued_jobs=",
                                                       options.max_queued_jobs, " reached (", *queued,
                                                       " jobs queued)"));
    }
  }
  Job job;
  job.set_id(NewId("job-"));
  job.set_request_id(request_id);
  job.set_tenant(options.tenant);
  job.set_state(JobState::JOB_STATE_QUEUED);
  *job.mutable_spec() = spec;
  if (spec.max_attempts() <= 0) job.mutable_spec()->set_max_attempts(options_.default_max_attempts);
  *job.mutable_created_at() = ToTimestamp(clock_->Now());
  job.set_content_key(options.content_key);
  job.set_needs_host_memory_bytes(options.needs_host_memory_bytes);
  job.set_needs_gpu_memory_bytes(options.needs_gpu_memory_bytes);
  std::vector<JobEvent> events;
  bool deduplicated = !options.content_key.empty() && !spec.force() && Deduplicate(&job, &events);
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
  if (!row.ok()) return row.status();
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

bool ReplicatedScheduler::Deduplicate(Job* job, std::vector<JobEvent>* events) {
  std::optional<Job> match = FindContentKeyMatch(*store_, *job);
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
