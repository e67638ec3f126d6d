// Internal to WorkerAgent: one leased job's cancel token, heartbeat thread and coalescing progress sink.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "core/base/log.h"
#include "worker/lease_storage.h"
#include "worker/worker_agent.h"

namespace quark::worker {

// One leased job: its cancel token, its heartbeat thread, and the coalescing progress sink the runner reports to.
// Whatever the runner reports leaves with the lease's storage keys redacted.
class WorkerAgent::LeaseRun : public ProgressSink {
 public:
  LeaseRun(WorkerAgent& agent, std::string lease_id, std::string job_id,
           const quark::v1::internal::StorageCredentials& credentials)
      : agent_(agent),
        lease_id_(std::move(lease_id)),
        job_id_(std::move(job_id)),
        credentials_(credentials),
        renewed_at_(std::chrono::steady_clock::now()) {}
  ~LeaseRun() override { StopHeartbeat(); }

  CancelToken& token() { return token_; }

  void StartHeartbeat() {
    heartbeat_ = std::thread([this] { HeartbeatLoop(); });
  }
  void StopHeartbeat() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    if (heartbeat_.joinable()) heartbeat_.join();
  }

  void Report(const quark::v1::Progress& progress) override {
    std::unique_lock<std::mutex> lock(mu_);
    auto now = std::chrono::steady_clock::now();
    bool due = now - last_sent_ >= agent_.options_.progress_interval || progress.phase() != last_phase_ ||
               progress.fraction() >= 1.0;
    pending_ = progress;
    if (HasStorageCredentials(credentials_)) pending_.set_message(Redact(pending_.message(), credentials_));
    has_pending_ = true;
    if (!due) return;  // the heartbeat thread or the next report sends the newest one
    SendPendingLocked(lock);
  }

  void Log(const std::string& line) override {
    quark::v1::internal::ReportProgressRequest request;
    request.set_lease_id(lease_id_);
    request.set_log(Redact(line, credentials_));
    Send(request);
  }

  void Metrics(const std::map<std::string, double>& metrics) override {
    std::lock_guard<std::mutex> lock(metrics_mu_);
    metrics_ = metrics;
  }
  std::map<std::string, double> metrics() const {
    std::lock_guard<std::mutex> lock(metrics_mu_);
    return metrics_;
  }

  void Flush() {
    std::unique_lock<std::mutex> lock(mu_);
    if (has_pending_) SendPendingLocked(lock);
  }

 private:
  // Sends the newest pending event; the RPC runs without the lock so Report() never waits on the network twice.
  void SendPendingLocked(std::unique_lock<std::mutex>& lock) {
    quark::v1::internal::ReportProgressRequest request;
    request.set_lease_id(lease_id_);
    *request.mutable_progress() = pending_;
    has_pending_ = false;
    last_sent_ = std::chrono::steady_clock::now();
    last_phase_ = pending_.phase();
    lock.unlock();
    Send(request);
    lock.lock();
  }

  void Send(const quark::v1::internal::ReportProgressRequest& request) {
    std::unique_ptr<grpc::ClientContext> context = agent_.NewContext(agent_.options_.rpc_timeout);
    quark::v1::internal::ReportProgressResponse response;
    const auto sent = std::chrono::steady_clock::now();
    grpc::Status status = agent_.stub_->ReportProgress(context.get(), request, &response);
    agent_.Untrack(context.get());
    if (!status.ok()) {
      log::Get("worker")->warn("job={} progress report failed: {}", job_id_, status.error_message());
      return;
    }
    Renewed(sent);  // quarkd renews a lease on progress as on a heartbeat
    if (response.cancel()) token_.Cancel(CancelToken::Reason::kCancelled);
  }

  // Self-fencing. quarkd expires a lease `lease_timeout` after the last heartbeat or progress report it received and
  // hands the job to another worker; a worker cut off from quarkd (a partition, a replica killed while a failover
  // connection is not up yet) cannot hear that. So the worker counts too, from the moment it *sent* the last renewal
  // that got through (never later than quarkd received it), and stops the job before quarkd can have given it away:
  // the same job never runs on two workers at once. The margin covers the response latency of the lease itself
  // (the starting point is when the lease arrived) and clock-rate differences.
  void Renewed(std::chrono::steady_clock::time_point sent) {
    std::lock_guard<std::mutex> lock(renewed_mu_);
    renewed_at_ = std::max(renewed_at_, sent);
  }
  // When the lease may have expired at quarkd; time_point::max() when quarkd announced no lease timeout.
  std::chrono::steady_clock::time_point FenceDeadline() {
    const int64_t timeout_ms = agent_.lease_timeout_ms_.load();
    if (timeout_ms <= 0) return std::chrono::steady_clock::time_point::max();
    const int64_t margin_ms = std::min(agent_.heartbeat_interval_ms_.load(), timeout_ms / 4);
    std::lock_guard<std::mutex> lock(renewed_mu_);
    return renewed_at_ + std::chrono::milliseconds(timeout_ms - margin_ms);
  }

  void HeartbeatLoop() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        const auto next = std::min(std::chrono::steady_clock::now() +
                                       std::chrono::milliseconds(agent_.heartbeat_interval_ms_.load()),
                                   FenceDeadline());
        if (cv_.wait_until(lock, next, [&] { return done_; })) return;
      }
      if (Fenced()) return;
      Flush();
      quark::v1::internal::HeartbeatRequest request;
      request.set_worker_id(agent_.options_.worker_id);
      request.set_lease_id(lease_id_);
      quark::v1::internal::HeartbeatResponse response;
      // A heartbeat that cannot get through before the fence is not waited for past it.
      const auto sent = std::chrono::steady_clock::now();
      const auto until_fence = std::chrono::duration_cast<std::chrono::milliseconds>(FenceDeadline() - sent);
      std::unique_ptr<grpc::ClientContext> context = agent_.NewContext(
          std::max(std::chrono::milliseconds(1), std::min(agent_.options_.rpc_timeout, until_fence)));
      grpc::Status status = agent_.stub_->Heartbeat(context.get(), request, &response);
      agent_.Untrack(context.get());
      if (!status.ok()) {
        log::Get("worker")->warn("job={} heartbeat failed: {}", job_id_, status.error_message());
        if (Fenced()) return;
        continue;
      }
      Renewed(sent);
      if (response.lease_lost()) {
        log::Get("worker")->warn("job={} lease {} lost; dropping the job", job_id_, lease_id_);
        token_.Cancel(CancelToken::Reason::kLeaseLost);
      } else if (response.cancel()) {
        log::Get("worker")->info("job={} cancel requested", job_id_);
        token_.Cancel(CancelToken::Reason::kCancelled);
      }
    }
  }

  // True (and the job is dropped as a lost lease) once the fence deadline has passed without a renewal.
  bool Fenced() {
    const auto deadline = FenceDeadline();
    if (std::chrono::steady_clock::now() < deadline) return false;
    log::Get("worker")->warn("job={} lease {}: no heartbeat or progress has reached quarkd for {} ms, so quarkd may "
                             "have expired the lease; dropping the job",
                             job_id_, lease_id_, agent_.lease_timeout_ms_.load());
    token_.Cancel(CancelToken::Reason::kLeaseLost);
    return true;
  }

  WorkerAgent& agent_;  // owns every LeaseRun and outlives it
  std::string lease_id_;
  std::string job_id_;
  const quark::v1::internal::StorageCredentials credentials_;  // for redaction; dropped with the run
  CancelToken token_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  quark::v1::Progress pending_;
  bool has_pending_ = false;
  std::string last_phase_;
  std::chrono::steady_clock::time_point last_sent_{};
  std::thread heartbeat_;
  std::mutex renewed_mu_;
  std::chrono::steady_clock::time_point renewed_at_;  // guarded by renewed_mu_: see Renewed()
  mutable std::mutex metrics_mu_;
  std::map<std::string, double> metrics_;  // the runner's figures, for a failed job's result
};

}  // namespace quark::worker
