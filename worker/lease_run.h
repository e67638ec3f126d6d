// Internal to WorkerAgent: one leased job's cancel token, heartbeat thread and coalescing progress sink.
#pragma once

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
      : agent_(agent), lease_id_(std::move(lease_id)), job_id_(std::move(job_id)), credentials_(credentials) {}
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
    grpc::Status status = agent_.stub_->ReportProgress(context.get(), request, &response);
    agent_.Untrack(context.get());
    if (!status.ok()) {
      log::Get("worker")->warn("job={} progress report failed: {}", job_id_, status.error_message());
    } else if (response.cancel()) {
      token_.Cancel(CancelToken::Reason::kCancelled);
    }
  }

  void HeartbeatLoop() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (cv_.wait_for(lock, std::chrono::milliseconds(agent_.heartbeat_interval_ms_.load()), [&] { return done_; })) {
          return;
        }
      }
      Flush();
      quark::v1::internal::HeartbeatRequest request;
      request.set_worker_id(agent_.options_.worker_id);
      request.set_lease_id(lease_id_);
      quark::v1::internal::HeartbeatResponse response;
      std::unique_ptr<grpc::ClientContext> context = agent_.NewContext(agent_.options_.rpc_timeout);
      grpc::Status status = agent_.stub_->Heartbeat(context.get(), request, &response);
      agent_.Untrack(context.get());
      if (!status.ok()) {
        log::Get("worker")->warn("job={} heartbeat failed: {}", job_id_, status.error_message());
        continue;
      }
      if (response.lease_lost()) {
        log::Get("worker")->warn("job={} lease {} lost; dropping the job", job_id_, lease_id_);
        token_.Cancel(CancelToken::Reason::kLeaseLost);
      } else if (response.cancel()) {
        log::Get("worker")->info("job={} cancel requested", job_id_);
        token_.Cancel(CancelToken::Reason::kCancelled);
      }
    }
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
  mutable std::mutex metrics_mu_;
  std::map<std::string, double> metrics_;  // the runner's figures, for a failed job's result
};

}  // namespace quark::worker
