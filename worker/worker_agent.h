// The worker's side of proto/quark/v1/worker.proto: register, long-poll for leases, heartbeat while a job runs,
// stream progress, complete. Jobs run on a JobRunner; the agent knows nothing of the engine.
#pragma once

#include <atomic>
#include <condition_variable>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "quark/v1/worker.grpc.pb.h"
#include "quark/version.h"
#include "worker/job_runner.h"

namespace quark::worker {

struct WorkerAgentOptions {
  /// quarkd's address, HOST:PORT (or any gRPC target, e.g. unix:/path).
  std::string server_address;
  /// Stable id; empty = "<hostname>:<pid>".
  std::string worker_id;
  /// Jobs run at once, each on its own lease loop.
  int slots = 1;
  /// Devices announced at registration ("cpu", "cuda:0", ...).
  std::vector<std::string> devices = {"cpu"};
  std::string version = QUARK_ENGINE_VERSION;
  /// How long one Lease call waits on the server for work.
  std::chrono::milliseconds lease_wait{10000};
  /// Progress events closer together than this are coalesced (the newest wins; phase changes always go out).
  std::chrono::milliseconds progress_interval{250};
  /// Waits between attempts to reach an unreachable server: doubles from min to max.
  std::chrono::milliseconds reconnect_min{200};
  std::chrono::milliseconds reconnect_max{5000};
  /// Deadline of every unary RPC but Lease.
  std::chrono::milliseconds rpc_timeout{10000};
  /// Exit (Run() returns OK) once no job has run for this long (batch schedulers: Slurm, scale-to-zero);
  /// 0 = never.
  std::chrono::milliseconds exit_when_idle{0};
  /// Complete is retried this many times (a lost Complete loses the job's work).
  int complete_attempts = 5;
  /// A job that failed for a cause outside it (RESOURCE_EXHAUSTED: this worker's disk is full; UNAVAILABLE: the
  /// store did not answer after its retries) is handed back to quarkd (re-queued, counted as an attempt against
  /// spec.max_attempts) instead of failing, and this slot waits this long before it leases again, so a worker with
  /// a full disk does not drain the queue by failing job after job.
  std::chrono::milliseconds transient_failure_pause{2000};
  /// Bearer token sent with every call ("authorization: Bearer ..."); quarkd with a tokens file requires one of
  /// role worker (or a listed mTLS identity). Empty = none.
  std::string token;
  /// TLS: PEM file of the CAs that signed quarkd's certificate; with tls_cert/tls_key also a client certificate
  /// (mutual TLS). All empty = plaintext.
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  /// Rates measured at start (throughput_probe.h), sent with Register for quarkd's estimates; unset = not measured.
  std::optional<quark::v1::internal::WorkerThroughput> throughput;
};

/// The channel to quarkd the options ask for: TLS when any tls_* is set, else plaintext. INVALID_ARGUMENT naming
/// the flag when a file cannot be read or only one of tls_cert/tls_key is given.
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeWorkerChannel(const WorkerAgentOptions& options);

/// Thread-safe. Run() blocks until Stop(); Stop() may be called from any thread (not a signal handler).
/// On a heartbeat or progress answer with cancel=true the runner's CancelToken fires and the job is completed
/// as cancelled; on lease_lost it fires and the job is dropped without Complete; on Stop() running jobs are
/// cancelled and handed back ("worker shutting down") so quarkd can retry them elsewhere; a lease that arrives as the
/// worker stops is handed back the same way without running.
class WorkerAgent {
 public:
  WorkerAgent(WorkerAgentOptions options, std::shared_ptr<JobRunner> runner);
  /// For tests: an existing channel (in-process server).
  WorkerAgent(WorkerAgentOptions options, std::shared_ptr<JobRunner> runner, std::shared_ptr<grpc::Channel> channel);
  ~WorkerAgent();
  WorkerAgent(const WorkerAgent&) = delete;
  WorkerAgent& operator=(const WorkerAgent&) = delete;

  /// Registers (retrying while the server is unreachable), then serves leases on options.slots threads until
  /// Stop(). Returns OK after Stop(), or the error of a registration the server refused.
  absl::Status Run();
  void Stop();

  const std::string& worker_id() const { return options_.worker_id; }
  /// Jobs completed so far (any outcome), for tests and logs.
  int jobs_finished() const { return jobs_finished_.load(); }

 private:
  class LeaseRun;

  absl::Status Register();
  void LeaseLoop(int slot);
  /// True when the job was handed back for a transient cause (see transient_failure_pause).
  bool RunLease(const quark::v1::internal::LeaseResponse& lease);
  /// quarkd's last answer (retried while transient).
  grpc::Status Complete(const quark::v1::internal::CompleteRequest& request, const std::string& job_id);
  /// #33 item 2: a successful run whose lease is gone (lost, or its completion refused) removes its artifacts.
  void DiscardStale(const quark::v1::Job& job, const LeaseContext& context, const quark::v1::JobResult& result,
                    const std::string& why);
  /// Sleeps up to `wait` unless stopping; false when stopping.
  bool Backoff(std::chrono::milliseconds wait);
  /// A ClientContext with a deadline (and the token), tracked so Stop() can cancel it.
  std::unique_ptr<grpc::ClientContext> NewContext(std::chrono::milliseconds timeout);
  void AddToken(grpc::ClientContext* context) const;
  void Untrack(grpc::ClientContext* context);

  WorkerAgentOptions options_;
  std::shared_ptr<JobRunner> runner_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<quark::v1::internal::WorkerService::Stub> stub_;
  static int64_t SteadyMs();
  /// exit_when_idle is set, no job runs and none has for that long.
  bool IdleTooLong() const;

  std::atomic<bool> stopping_{false};
  std::atomic<int> jobs_finished_{0};
  std::atomic<int> jobs_running_{0};
  std::atomic<int64_t> idle_since_ms_{0};  // steady clock, when the last job ended (or Run started)
  std::atomic<int64_t> heartbeat_interval_ms_{2000};
  // The server's lease timeout (RegisterResponse); 0 = not announced (an old server): no self-fencing.
  std::atomic<int64_t> lease_timeout_ms_{0};
  std::mutex mu_;
  std::condition_variable stop_cv_;
  std::set<grpc::ClientContext*> live_contexts_;  // guarded by mu_; not owned
  std::set<CancelToken*> live_tokens_;            // guarded by mu_; not owned
};

/// "<hostname>:<pid>".
std::string DefaultWorkerId();

/// UNAVAILABLE, DEADLINE_EXCEEDED and RESOURCE_EXHAUSTED: worth another try after a pause.
bool IsTransientRpcError(const grpc::Status& status);

/// Whether a job's failure came from outside the job (RESOURCE_EXHAUSTED: a full disk; UNAVAILABLE: a store that
/// did not answer after its retries), so another attempt may succeed: the agent hands such a job back.
bool IsTransientJobFailure(const absl::Status& status);

}  // namespace quark::worker
