// quarkd assembled: the job store, scheduler, gRPC services (QuantizationService, WorkerService,
// grpc.health.v1, reflection), /metrics, and the local worker pool.
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "server/scheduler/job_retention.h"
#include "server/scheduler/job_scheduler.h"
#include "server/scheduler/scheduler.h"
#include "server/workers/slurm_executor.h"

namespace grpc {
class Server;
}

namespace quark::server {

namespace metrics {
class HttpExposer;
class Registry;
}  // namespace metrics
class AccessControl;
class AdminServiceImpl;
class ProvenanceServiceImpl;
class Authenticator;
class EventHub;
class ReloadableTlsCredentials;
class QuantizationServiceImpl;
class EventRelay;
class JobStore;
class PostgresJobStore;
class UriPolicy;
class WorkerPool;
class WorkerServiceImpl;
class WorkerProfiles;
struct ServerMetrics;

struct ServerOptions {
  std::string data_dir;                          // required: holds quarkd.db (created when missing)
  /// "" or "sqlite": SQLite in data_dir (one quarkd). "postgres://..." (or "postgresql://..."): PostgreSQL
  /// shared by several replicas (queue and leases in the database, ReplicatedScheduler).
  std::string store;
  /// This replica's name with a shared store: prefixes local worker ids ("<id>.local-N"). "" = the hostname.
  std::string replica_id;
  /// Graceful drain (Drain(), SIGTERM): how long running jobs of this replica may take to finish.
  absl::Duration drain_grace = absl::Seconds(30);
  std::string listen = "127.0.0.1:50051";        // gRPC; port 0 picks a free port
  std::string metrics_listen = "127.0.0.1:9464"; // /metrics; port 0 picks a free port; "" disables it
  int workers = -1;                              // local workers: -1 = one per visible GPU (or 1 on CPU), 0 = none
  std::string worker_binary;                     // "" = DefaultWorkerBinary()
  std::vector<std::string> worker_args;          // extra arguments for every local worker
  std::vector<std::string> allowed_roots;        // file:// URIs must lie inside one of these
  int max_message_bytes = 64 << 20;              // largest gRPC message accepted or sent
  // Security (README "Secure setup"). Without tls_cert the port is plaintext, which quarkd allows only on a
  // loopback listen address unless `insecure` is set.
  std::string tls_cert;                          // PEM chain; with tls_key: TLS, reloaded by ReloadSecurity()
  std::string tls_key;
  std::string tls_client_ca;                     // mutual TLS: client certificates signed by these CAs required
  bool insecure = false;                         // allow plaintext gRPC on a non-loopback address
  std::string tokens_file;                       // bearer tokens + tenants (security_config.h); "" = auth off
  std::string metrics_token_file;                // /metrics requires "Authorization: Bearer <file's token>"
  absl::Duration tick_interval = absl::Milliseconds(100);  // lease/cancel expiry checks
  /// "local" (the worker pool above only) or "slurm": also a SlurmExecutor starting batch workers for queued
  /// jobs (`slurm`; its server_address defaults to grpc_address(), its work_dir to DATA_DIR/slurm).
  std::string executor = "local";
  /// GPU workers join from elsewhere (a Kubernetes Deployment scaled from zero): a job asking for GPUs queues even
  /// when no registered worker, local GPU or executor can provide them (else it is refused at submit).
  bool expect_gpu_workers = false;
  /// #29 verified dedup: hand s3:// results to identical jobs on the worker's reported digests (quarkd reads no
  /// object store); without it only file:// results, re-checked, are reused.
  bool trust_object_store = false;
  /// #29 retention: finished jobs older than retention.max_age leave the store as DeleteJob removes them, at start
  /// and every retention.sweep_interval (off by default).
  RetentionPolicy retention;
  SlurmExecutorOptions slurm;
  SchedulerOptions scheduler;
  /// #34 signed provenance: Ed25519 private key (PEM). Local workers sign manifest.json with it (passed as
  /// QUARK_WORKER_SIGNING_KEY); quarkd serves its public half (ProvenanceService). "" = unsigned manifests.
  std::string signing_key;
};

/// Thread-safe after Start. Shutdown (or destruction) stops accepting calls, answers parked long polls,
/// waits for live calls (streams cancelled after a short grace), stops the local workers.
class QuarkServer {
 public:
  /// Opens the store, recovers the queue, binds both ports, starts the local workers. Errors name the option.
  static absl::StatusOr<std::unique_ptr<QuarkServer>> Start(const ServerOptions& options,
                                                           Clock* clock = SystemClock::Get());
  ~QuarkServer();

  /// The bound gRPC port and a dialable address ("127.0.0.1:PORT" for wildcard hosts).
  int grpc_port() const { return grpc_port_; }
  std::string grpc_address() const { return grpc_address_; }
  /// The bound /metrics port (0 when disabled).
  int metrics_port() const;

  /// SIGHUP: re-reads the TLS certificate and key (new handshakes use them) and the tokens file. A bad file
  /// keeps the old one and is returned as the error.
  absl::Status ReloadSecurity();

  /// Graceful drain: health NOT_SERVING, no new leases, waits up to options.drain_grace for jobs leased through
  /// this replica to end, then Shutdown(): local workers get SIGTERM and hand unfinished jobs back to the queue.
  void Drain();

  /// Blocks until Shutdown() is called (from another thread or a signal watcher).
  void Wait();
  void Shutdown();

  Scheduler* scheduler() { return scheduler_.get(); }
  metrics::Registry* registry() { return registry_.get(); }
  WorkerPool* worker_pool() { return worker_pool_.get(); }

 private:
  QuarkServer() = default;
  absl::Status OpenStore(const ServerOptions& options, Clock* clock);
  absl::Status StartGrpc(const ServerOptions& options);
  absl::Status StartSecurity(const ServerOptions& options);
  /// #36: the parents' manifest writer: quarkd's storage (allowed roots, its environment's S3 settings) narrowed to
  /// each parent's tenant, signed with signing_key when set.
  absl::StatusOr<std::shared_ptr<const SweepManifestWriter>> MakeSweepManifestWriter(const ServerOptions& options);
  void ApplyTenantLimits();
  void AfterTokensReload();
  absl::Status StartWorkers(const ServerOptions& options);
  absl::Status StartExecutor(const ServerOptions& options);
  void StartRetention(const ServerOptions& options, Clock* clock);

  std::unique_ptr<metrics::Registry> registry_;
  std::unique_ptr<ServerMetrics> metrics_;
  std::unique_ptr<JobStore> store_;
  PostgresJobStore* pg_store_ = nullptr;  // store_, when shared
  std::unique_ptr<EventHub> hub_;
  std::unique_ptr<EventRelay> relay_;
  std::unique_ptr<Scheduler> scheduler_;
  absl::Duration drain_grace_;
  std::unique_ptr<UriPolicy> policy_;
  std::unique_ptr<Authenticator> auth_;
  std::unique_ptr<AccessControl> access_;
  std::unique_ptr<ReloadableTlsCredentials> tls_;  // outlives grpc_server_ (its handshakes call into it)
  std::string local_worker_address_;               // where local workers dial (a unix socket under TLS)
  std::string local_worker_token_;
  /// "-" + 16 random hex digits after every local worker's "local-N" (#29: ids unknown before this start).
  const std::string local_worker_suffix_ = "-" + NewId("").substr(0, 16);
  std::unique_ptr<WorkerProfiles> worker_profiles_;  // read by quantization_service_, fed by worker_service_
  std::unique_ptr<QuantizationServiceImpl> quantization_service_;
  std::unique_ptr<WorkerServiceImpl> worker_service_;
  std::unique_ptr<AdminServiceImpl> admin_service_;
  std::unique_ptr<ProvenanceServiceImpl> provenance_service_;
  std::unique_ptr<grpc::Server> grpc_server_;
  std::unique_ptr<metrics::HttpExposer> exposer_;
  std::unique_ptr<WorkerPool> worker_pool_;
  std::unique_ptr<SlurmExecutor> slurm_;
  std::thread ticker_;
  std::unique_ptr<JobRetention> retention_;
  std::thread retention_thread_;  // sweeps retention_ (a sweep may take a while: off the ticker)
  absl::Notification stop_;
  absl::Notification stopped_;
  absl::Mutex shutdown_mu_;
  int grpc_port_ = 0;
  std::string grpc_address_;
};

}  // namespace quark::server
