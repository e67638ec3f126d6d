// The lease loop and one job's life inside WorkerAgent.
#include <exception>

#include "core/base/log.h"
#include "worker/storage/strings.h"
#include "worker/lease_run.h"
#include "worker/worker_agent.h"

namespace quark::worker {
namespace {

namespace internal = quark::v1::internal;

// Runners must not throw; this keeps a buggy one from taking the worker down with the job.
absl::StatusOr<quark::v1::JobResult> RunGuarded(JobRunner& runner, const quark::v1::Job& job,
                                                const LeaseContext& lease, ProgressSink& sink,
                                                const CancelToken& token) {
  try {
    return runner.Run(job, lease, sink, token);
  } catch (const std::exception& e) {
    return absl::InternalError(str::Cat("job runner threw: ", e.what()));
  } catch (...) {
    return absl::InternalError("job runner threw a non-standard exception");
  }
}

}  // namespace

int64_t WorkerAgent::SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool IsTransientJobFailure(const absl::Status& status) {
  return status.code() == absl::StatusCode::kResourceExhausted || status.code() == absl::StatusCode::kUnavailable;
}

bool WorkerAgent::IdleTooLong() const {
  return options_.exit_when_idle.count() > 0 && jobs_running_.load() == 0 &&
         SteadyMs() - idle_since_ms_.load() >= options_.exit_when_idle.count();
}

void WorkerAgent::LeaseLoop(int slot) {
  std::chrono::milliseconds wait = options_.reconnect_min;
  while (!stopping_.load()) {
    internal::LeaseRequest request;
    request.set_worker_id(options_.worker_id);
    // With exit_when_idle, a Lease call never outwaits the idle limit, so the check below runs in time.
    std::chrono::milliseconds lease_wait = options_.lease_wait;
    if (options_.exit_when_idle.count() > 0) lease_wait = std::min(lease_wait, options_.exit_when_idle);
    request.set_wait_ms(lease_wait.count());
    internal::LeaseResponse response;
    std::unique_ptr<grpc::ClientContext> context =
        NewContext(options_.lease_wait + std::chrono::milliseconds(5000));
    grpc::Status status = stub_->Lease(context.get(), request, &response);
    Untrack(context.get());
    // A lease that arrived as the worker stopped is still this worker's: RunLease hands it back without running it,
    // so the job is queued again now instead of when its lease expires.
    if (stopping_.load() && (!status.ok() || response.lease_id().empty())) break;
    if (!status.ok()) {
      if (status.error_code() == grpc::StatusCode::NOT_FOUND ||
          status.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
        // quarkd no longer knows this worker (it restarted, or declared us dead): register again.
        log::Get("worker")->warn("worker={} slot={} lease refused ({}); registering again", options_.worker_id, slot,
                                 status.error_message());
        if (absl::Status registered = Register(); !registered.ok()) {
          log::Get("worker")->error("worker={} {}", options_.worker_id, std::string(registered.message()));
        }
      } else if (!IsTransientRpcError(status)) {
        log::Get("worker")->warn("worker={} slot={} lease: {}", options_.worker_id, slot, status.error_message());
      }
      if (!Backoff(wait)) break;
      wait = std::min(wait * 2, options_.reconnect_max);
      continue;
    }
    wait = options_.reconnect_min;
    if (response.lease_id().empty()) {
      if (IdleTooLong()) {
        log::Get("worker")->info("worker={} idle for {} ms: exiting (--exit-when-idle)", options_.worker_id,
                                 options_.exit_when_idle.count());
        Stop();
      }
      continue;
    }
    jobs_running_.fetch_add(1);
    const bool handed_back = RunLease(response);
    idle_since_ms_.store(SteadyMs());
    jobs_running_.fetch_sub(1);
    if (handed_back && !Backoff(options_.transient_failure_pause)) break;
  }
}

bool WorkerAgent::RunLease(const internal::LeaseResponse& lease) {
  const quark::v1::Job& job = lease.job();
  log::Get("worker")->info("job={} leased (lease {}, attempt {})", job.id(), lease.lease_id(), lease.attempt());
  LeaseContext context;
  context.storage_credentials = lease.storage_credentials();
  context.tenant_roots = lease.tenant_roots();
  LeaseRun run(*this, lease.lease_id(), job.id(), context.storage_credentials);
  bool stopped_before_start = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    live_tokens_.insert(&run.token());
    if (stopping_.load()) {
      run.token().Cancel(CancelToken::Reason::kShutdown);
      stopped_before_start = true;
    }
  }
  absl::StatusOr<quark::v1::JobResult> result = absl::CancelledError("the lease arrived as the worker stopped");
  if (!stopped_before_start) {
    run.StartHeartbeat();
    result = RunGuarded(*runner_, job, context, run, run.token());
    run.StopHeartbeat();
    run.Flush();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    live_tokens_.erase(&run.token());
  }
  CancelToken::Reason reason = run.token().reason();
  if (reason == CancelToken::Reason::kLeaseLost) {
    // A run that published before it noticed: its attempt's folder goes (a newer attempt has a folder of its own).
    if (result.ok()) DiscardStale(job, context, *result, "its lease was lost");
    jobs_finished_.fetch_add(1);
    return false;  // the lease belongs to nobody now; quarkd already re-queued the job
  }
  internal::CompleteRequest complete;
  complete.set_lease_id(lease.lease_id());
  complete.set_job_id(job.id());
  if (result.ok()) {
    complete.set_success(true);
    *complete.mutable_result() = *result;
  } else if (reason == CancelToken::Reason::kCancelled) {
    complete.set_cancelled(true);
    complete.set_error(std::string(result.status().message()));
  } else if (reason == CancelToken::Reason::kShutdown) {
    complete.set_error(str::Cat("worker ", options_.worker_id, " shutting down: ", result.status().message()));
    complete.set_handed_back(true);  // quarkd requeues it for another worker
  } else if (IsTransientJobFailure(result.status())) {
    complete.set_error(str::Cat("worker ", options_.worker_id, ": ", result.status().ToString()));
    complete.set_handed_back(true);  // another attempt, maybe on another worker, may well succeed
  } else {
    complete.set_error(result.status().ToString());
    // A run the accuracy gate failed still tells its figures (ppl_before, ppl_after, ...).
    for (const auto& [name, value] : run.metrics()) (*complete.mutable_result()->mutable_metrics())[name] = value;
  }
  // Errors may quote a store's answer or a URL: the lease's keys never leave in them (nor in the log below).
  complete.set_error(Redact(complete.error(), context.storage_credentials));
  log::Get("worker")->info("job={} {}{}", job.id(),
                           complete.success() ? "succeeded" : complete.cancelled() ? "cancelled" : "failed: ",
                           complete.error());
  const grpc::Status completed = Complete(complete, job.id());
  // Refused (the lease expired meanwhile, or the result was not this attempt's): nothing of it stays visible. A
  // completion quarkd never answered may have been taken, so its artifacts stay; one it took but whose answer was
  // lost is answered OK when sent again (CompleteRequest.job_id), so its artifacts stay too.
  if (complete.success() && !completed.ok() && !IsTransientRpcError(completed)) {
    DiscardStale(job, context, complete.result(),
                 str::Cat("quarkd refused its completion: ", completed.error_message()));
  }
  jobs_finished_.fetch_add(1);
  return complete.handed_back() && reason == CancelToken::Reason::kNone;
}

void WorkerAgent::DiscardStale(const quark::v1::Job& job, const LeaseContext& context,
                               const quark::v1::JobResult& result, const std::string& why) {
  const absl::Status discarded = runner_->Discard(job, context, result);
  if (discarded.ok()) {
    log::Get("worker")->warn("job={} attempt {}: {}; its artifacts are removed", job.id(), job.attempts_size(), why);
  } else {
    log::Get("worker")->error("job={} attempt {}: {}; removing its artifacts failed: {}", job.id(), job.attempts_size(),
                              why, std::string(discarded.message()));
  }
}

grpc::Status WorkerAgent::Complete(const internal::CompleteRequest& request, const std::string& job_id) {
  std::chrono::milliseconds wait = options_.reconnect_min;
  grpc::Status last(grpc::StatusCode::UNAVAILABLE, "no Complete sent (complete_attempts is 0)");
  for (int attempt = 1; attempt <= options_.complete_attempts; ++attempt) {
    internal::CompleteResponse response;
    // Complete must get through even while stopping: its own context, not cancelled by Stop().
    grpc::ClientContext context;
    AddToken(&context);
    context.set_deadline(std::chrono::system_clock::now() + options_.rpc_timeout);
    last = stub_->Complete(&context, request, &response);
    if (last.ok()) return last;
    log::Get("worker")->warn("job={} complete attempt {} failed: {}", job_id, attempt, last.error_message());
    if (!IsTransientRpcError(last)) return last;
    std::this_thread::sleep_for(wait);
    wait = std::min(wait * 2, options_.reconnect_max);
  }
  return last;
}

}  // namespace quark::worker
