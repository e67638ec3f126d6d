#include "server/quark_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/ed25519.h"
#include "core/base/log.h"
#include "server/log_text.h"
#include "server/api/access_control.h"
#include "server/api/admin_service.h"
#include "server/api/sweep_manifest_store.h"
#include "server/api/provenance_service.h"
#include "server/api/quantization_service.h"
#include "server/api/uri_policy.h"
#include "server/api/worker_service.h"
#include "server/metrics/grpc_metrics_interceptor.h"
#include "server/metrics/http_exposer.h"
#include "server/metrics/registry.h"
#include "server/metrics/server_metrics.h"
#include "server/scheduler/event_hub.h"
#include "server/security/authenticator.h"
#include "server/security/tls_credentials.h"
#include "server/scheduler/event_relay.h"
#include "server/scheduler/replicated_scheduler.h"
#include "server/scheduler/sweep_manifest.h"
#include "server/store/postgres_job_store.h"
#include "server/store/sqlite_job_store.h"
#include "server/workers/local_devices.h"
#include "server/workers/worker_pool.h"

namespace quark::server {
namespace {

// Dialable from this machine: wildcard listen hosts become loopback.
std::string DialAddress(const std::string& host, int port) {
  if (host.empty() || host == "0.0.0.0" || host == "::" || host == "*") return absl::StrCat("127.0.0.1:", port);
  if (host.find(':') != std::string::npos) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

constexpr absl::Duration kShutdownGrace = absl::Seconds(2);
constexpr absl::Duration kRetentionCheckInterval = absl::Seconds(1);  // is a sweep due (by the clock)?
constexpr int kTokenCheckTicks = 10;  // the tokens file's mtime is looked at every 10th tick (~1 s)
constexpr size_t kMaxUnixSocketPath = 100;

absl::StatusOr<std::string> ReadToken(const std::string& path) {
  std::ifstream in(path);
  std::string token;
  if (!in || !std::getline(in, token)) {
    return absl::InvalidArgumentError(absl::StrCat("metrics-token-file: cannot read \"", path, "\""));
  }
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
  if (token.empty()) return absl::InvalidArgumentError(absl::StrCat("metrics-token-file: \"", path, "\" is empty"));
  return token;
}

// Reachable from other machines with nobody checked: started (plaintext needs --insecure, which says as much), but
// said loudly, once, at start.
void WarnInsecureCombinations(const ServerOptions& options, bool tokens) {
  std::string host;
  int port = 0;
  if (!tokens && metrics::SplitHostPort("listen", options.listen, &host, &port).ok() && !IsLoopbackHost(host)) {
    log::Get("server")->warn("job=- listen {} is reachable from other machines without --tokens-file: every caller "
                             "is an anonymous admin and may act as a worker", ForLog(options.listen, 200));
  }
  if (!options.metrics_listen.empty() && options.metrics_token_file.empty() &&
      metrics::SplitHostPort("metrics-listen", options.metrics_listen, &host, &port).ok() && !IsLoopbackHost(host)) {
    log::Get("server")->warn("job=- metrics-listen {} is reachable from other machines without "
                             "--metrics-token-file: anyone may scrape it", ForLog(options.metrics_listen, 200));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<QuarkServer>> QuarkServer::Start(const ServerOptions& options, Clock* clock) {
  if (options.data_dir.empty()) return absl::InvalidArgumentError("data-dir: required");
  std::error_code error;
  const bool created = std::filesystem::create_directories(options.data_dir, error);
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat("data-dir: cannot create \"", options.data_dir, "\": ", error.message()));
  }
  // The store, the workers' folders and the local workers' socket live here: quarkd's user only.
  if (created) std::filesystem::permissions(options.data_dir, std::filesystem::perms::owner_all, error);
  struct stat info {};
  if (stat(options.data_dir.c_str(), &info) == 0 && (info.st_mode & 077) != 0) {
    log::Get("server")->warn("job=- data-dir {} is open to other users (mode {:o}); chmod 700 it", options.data_dir,
                             info.st_mode & 0777);
  }
  std::unique_ptr<QuarkServer> server(new QuarkServer());
  server->registry_ = std::make_unique<metrics::Registry>();
  server->metrics_ = std::make_unique<ServerMetrics>(server->registry_.get());
  server->drain_grace_ = options.drain_grace;
  absl::Status status = server->OpenStore(options, clock);
  if (!status.ok()) return status;
  server->policy_ = std::make_unique<UriPolicy>(options.allowed_roots);
  status = server->StartSecurity(options);
  if (!status.ok()) return status;
  server->access_ = std::make_unique<AccessControl>(server->auth_.get(), server->store_.get(), server->metrics_.get(),
                                                    clock);
  // After the tenants' policies are known: a sweep parent that ends while recovering writes its manifest through its
  // tenant's store (sweep_manifest_store.h).
  status = server->scheduler_->Recover();
  if (!status.ok()) return status;
  status = server->StartGrpc(options);
  if (!status.ok()) return status;
  if (!options.metrics_listen.empty()) {
    std::string metrics_token;
    if (!options.metrics_token_file.empty()) {
      absl::StatusOr<std::string> token = ReadToken(options.metrics_token_file);
      if (!token.ok()) return token.status();
      metrics_token = *token;
    }
    absl::StatusOr<std::unique_ptr<metrics::HttpExposer>> exposer =
        metrics::HttpExposer::Start(options.metrics_listen, server->registry_.get(), nullptr, metrics_token);
    if (!exposer.ok()) return exposer.status();
    server->exposer_ = std::move(*exposer);
  }
  QuarkServer* self = server.get();
  absl::Duration tick = options.tick_interval;
  server->ticker_ = std::thread([self, tick] {
    for (int ticks = 1; !self->stop_.WaitForNotificationWithTimeout(tick); ++ticks) {
      self->scheduler_->Tick();
      if (ticks % kTokenCheckTicks == 0 && self->auth_->ReloadIfChanged()) self->AfterTokensReload();
    }
  });
  server->StartRetention(options, clock);
  status = server->StartWorkers(options);
  if (status.ok()) status = server->StartExecutor(options);
  if (!status.ok()) return status;
  log::Get("server")->info("job=- quarkd serving grpc={} tls={} auth={} metrics={} data_dir={}",
                           server->grpc_address_, server->tls_ ? (options.tls_client_ca.empty() ? "on" : "mutual")
                                                               : "off",
                           server->auth_->enabled() ? "tokens" : "off", server->metrics_port(), options.data_dir);
  return server;
}

absl::Status QuarkServer::OpenStore(const ServerOptions& options, Clock* clock) {
  hub_ = std::make_unique<EventHub>();
  bool postgres = options.store.rfind("postgres://", 0) == 0 || options.store.rfind("postgresql://", 0) == 0;
  if (!postgres) {
    if (!options.store.empty() && options.store != "sqlite") {
      return absl::InvalidArgumentError(absl::StrCat("store: \"", RedactDsn(options.store),
                                                     "\" is neither sqlite nor a postgres:// URI"));
    }
    absl::StatusOr<std::unique_ptr<SqliteJobStore>> store =
        SqliteJobStore::Open((std::filesystem::path(options.data_dir) / "quarkd.db").string());
    if (!store.ok()) return store.status();
    store_ = std::move(*store);
    SchedulerOptions scheduler_options = options.scheduler;
    absl::StatusOr<std::shared_ptr<const SweepManifestWriter>> manifests = MakeSweepManifestWriter(options);
    if (!manifests.ok()) return manifests.status();
    scheduler_options.sweep_manifests = *std::move(manifests);
    scheduler_ = std::make_unique<JobScheduler>(store_.get(), clock, hub_.get(), metrics_.get(), scheduler_options);
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<PostgresJobStore>> store = PostgresJobStore::Open(options.store);
  if (!store.ok()) return store.status();
  pg_store_ = store->get();
  store_ = std::move(*store);
  relay_ = std::make_unique<EventRelay>(store_.get(), hub_.get());
  auto replicated = std::make_unique<ReplicatedScheduler>(store_.get(), pg_store_, clock, relay_.get(),
                                                          metrics_.get(), options.scheduler);
  ReplicatedScheduler* scheduler = replicated.get();
  EventRelay* relay = relay_.get();
  scheduler_ = std::move(replicated);
  pg_store_->StartListening(
      [scheduler, relay](const std::string& channel, const std::string& payload) {
        if (channel == kQueueChannel) {
          scheduler->Wake();
          return;
        }
        size_t space = payload.find(' ');
        int64_t first = 0;
        if (space != std::string::npos) first = std::atoll(payload.c_str() + space + 1);
        relay->Poke(payload.substr(0, space), first);
      },
      [scheduler, relay] {
        relay->PokeAll();
        scheduler->Wake();
      });
  log::Get("server")->info("job=- store: PostgreSQL {}", RedactDsn(options.store));
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const SweepManifestWriter>> QuarkServer::MakeSweepManifestWriter(
    const ServerOptions& options) {
  std::optional<storage::S3Config> s3;
  if (absl::StatusOr<storage::S3Config> loaded = storage::LoadS3Config(storage::ProcessEnvironment()); loaded.ok()) {
    s3 = *std::move(loaded);
  } else {  // as a worker would refuse to start; quarkd runs on, and an s3:// parent's manifest fails naming this
    log::Get("server")->warn("job=- s3:// sweep manifests disabled: {}", ForLog(loaded.status().ToString()));
  }
  std::shared_ptr<const Ed25519Signer> signer;
  if (!options.signing_key.empty()) {
    absl::StatusOr<std::unique_ptr<Ed25519Signer>> loaded = Ed25519Signer::FromPemFile(options.signing_key);
    if (!loaded.ok()) return absl::InvalidArgumentError(absl::StrCat("signing-key: ", loaded.status().message()));
    signer = *std::move(loaded);
  }
  // access_ is read at each write: it is set before Recover(), the first moment a parent can end.
  ParentStoreFor stores = [this, roots = options.allowed_roots, s3](const quark::v1::Job& parent) {
    return MakeParentStoreFor(roots, s3, access_.get())(parent);
  };
  return std::make_shared<const SweepManifestWriter>(std::move(stores), std::move(signer));
}

absl::Status QuarkServer::StartSecurity(const ServerOptions& options) {
  absl::StatusOr<std::unique_ptr<Authenticator>> auth = Authenticator::Create(options.tokens_file);
  if (!auth.ok()) return auth.status();
  auth_ = std::move(*auth);
  if (auth_->enabled()) local_worker_token_ = auth_->MintLocalWorkerToken();
  ApplyTenantLimits();
  if (!options.tls_cert.empty() || !options.tls_key.empty() || !options.tls_client_ca.empty()) {
    absl::StatusOr<std::unique_ptr<ReloadableTlsCredentials>> tls =
        ReloadableTlsCredentials::Load({options.tls_cert, options.tls_key, options.tls_client_ca});
    if (!tls.ok()) return tls.status();
    tls_ = std::move(*tls);
  }
  WarnInsecureCombinations(options, auth_->enabled());
  return absl::OkStatus();
}

void QuarkServer::ApplyTenantLimits() {
  std::map<std::string, int64_t> limits;
  for (const auto& [tenant, policy] : auth_->config()->tenants) {
    if (policy.max_running_jobs > 0) limits[tenant] = policy.max_running_jobs;
  }
  scheduler_->SetTenantRunningLimits(std::move(limits));
}

void QuarkServer::AfterTokensReload() {
  ApplyTenantLimits();
  // A token no longer in the file loses its open streams too, not only its next call.
  if (quantization_service_ != nullptr) quantization_service_->EndRevokedWatches();
}

absl::Status QuarkServer::ReloadSecurity() {
  absl::Status status = tls_ ? tls_->Reload() : absl::OkStatus();
  absl::Status tokens = auth_->enabled() ? auth_->Reload() : absl::OkStatus();
  if (tokens.ok()) AfterTokensReload();
  return status.ok() ? tokens : status;
}

absl::Status QuarkServer::StartGrpc(const ServerOptions& options) {
  std::string host;
  int port = 0;
  absl::Status status = metrics::SplitHostPort("listen", options.listen, &host, &port);
  if (!status.ok()) return status;
  if (!tls_ && !options.insecure && !IsLoopbackHost(host)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "listen: \"", options.listen, "\" is reachable from other machines: give --tls-cert and --tls-key, "
        "or --insecure to serve plaintext gRPC there"));
  }
  worker_profiles_ = std::make_unique<WorkerProfiles>();
  GpuSources gpu_sources;
  gpu_sources.executor = options.executor.empty() ? "local" : options.executor;
  gpu_sources.executor_starts_gpu_workers = options.executor == "slurm";  // sbatch --gres=gpu:N
  gpu_sources.remote_gpu_workers = options.expect_gpu_workers;
  // StartWorkers gives each local worker one visible GPU when there are any.
  gpu_sources.local_gpus_per_worker = options.workers != 0 && !VisibleGpus().empty() ? 1 : 0;
  quantization_service_ = std::make_unique<QuantizationServiceImpl>(scheduler_.get(), store_.get(), hub_.get(),
                                                                    policy_.get(), access_.get(), worker_profiles_.get(),
                                                                    gpu_sources, options.trust_object_store);
  worker_service_ = std::make_unique<WorkerServiceImpl>(scheduler_.get(), access_.get(), worker_profiles_.get());
  // Drain/Resume name a local worker by its slot ("local-0"): its id changes with every start (#29).
  admin_service_ = std::make_unique<AdminServiceImpl>(
      scheduler_.get(), store_.get(), access_.get(),
      [suffix = local_worker_suffix_](const std::string& name) {
        return WorkerBindings::IsLocalWorkerSlot(name) ? name + suffix : name;
      });
  std::optional<Ed25519PublicKey> signing_key;
  if (!options.signing_key.empty()) {
    absl::StatusOr<std::unique_ptr<Ed25519Signer>> signer = Ed25519Signer::FromPemFile(options.signing_key);
    if (!signer.ok()) return absl::InvalidArgumentError(absl::StrCat("signing-key: ", signer.status().message()));
    signing_key = (*signer)->public_key();
  }
  provenance_service_ = std::make_unique<ProvenanceServiceImpl>(std::move(signing_key), access_.get());
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, tls_ ? tls_->Credentials() : grpc::InsecureServerCredentials(),
                           &grpc_port_);
  if (tls_) {
    // Local workers cannot check the public certificate's names against 127.0.0.1, so they dial a unix socket
    // in a folder only quarkd's user may enter (still with their worker token when authentication is on).
    std::filesystem::path run_dir = std::filesystem::path(options.data_dir) / "run";
    std::error_code error;
    std::filesystem::create_directories(run_dir, error);
    chmod(run_dir.c_str(), 0700);
    std::string socket = std::filesystem::absolute(run_dir / "worker.sock", error).string();
    if (socket.size() > kMaxUnixSocketPath) {
      return absl::InvalidArgumentError(absl::StrCat("data-dir: the local workers' socket \"", socket,
                                                     "\" is longer than ", kMaxUnixSocketPath, " bytes"));
    }
    std::filesystem::remove(socket, error);
    local_worker_address_ = "unix:" + socket;
    builder.AddListeningPort(local_worker_address_, grpc::InsecureServerCredentials());
  }
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  builder.RegisterService(quantization_service_.get());
  builder.RegisterService(worker_service_.get());
  builder.RegisterService(admin_service_.get());
  builder.RegisterService(provenance_service_.get());
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<GrpcMetricsInterceptorFactory>(metrics_.get()));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  grpc_server_ = builder.BuildAndStart();
  if (grpc_server_ == nullptr || grpc_port_ == 0) {
    return absl::UnavailableError(absl::StrCat("listen: cannot bind \"", options.listen, "\""));
  }
  grpc_server_->GetHealthCheckService()->SetServingStatus("quark.v1.QuantizationService", true);
  grpc_address_ = DialAddress(host, grpc_port_);
  if (local_worker_address_.empty()) local_worker_address_ = grpc_address_;
  return absl::OkStatus();
}

absl::Status QuarkServer::StartWorkers(const ServerOptions& options) {
  WorkerPoolOptions pool;
  pool.gpus = VisibleGpus();
  pool.count = options.workers >= 0 ? options.workers : std::max<int>(1, static_cast<int>(pool.gpus.size()));
  if (pool.count == 0) return absl::OkStatus();
  pool.binary = options.worker_binary.empty() ? DefaultWorkerBinary() : options.worker_binary;
  pool.server_address = local_worker_address_;
  if (pg_store_ != nullptr) {
    std::string replica = options.replica_id;
    if (replica.empty()) {
      char host[256] = {};
      gethostname(host, sizeof(host) - 1);
      replica = host;
    }
    pool.id_prefix = replica + ".";
  }
  // #29: ids unknown before this start (they are reserved for the local principal as well: worker_binding.h).
  pool.id_suffix = local_worker_suffix_;
  pool.extra_args = options.worker_args;
  // quark-worker reads QUARK_WORKER_<FLAG>: local workers share quarkd's roots and get a work folder each
  // (flags given with --worker-arg still win over these).
  if (!options.allowed_roots.empty()) {
    pool.env.push_back("QUARK_WORKER_ALLOWED_ROOTS=" + absl::StrJoin(options.allowed_roots, ","));
  }
  // The environment, not the command line: other users can read a process's arguments.
  if (!local_worker_token_.empty()) pool.env.push_back("QUARK_WORKER_TOKEN=" + local_worker_token_);
  if (!options.signing_key.empty()) {
    std::error_code error;
    pool.env.push_back("QUARK_WORKER_SIGNING_KEY=" + std::filesystem::absolute(options.signing_key, error).string());
  }
  // Named by slot, not id: a worker's checkpoints, job folders and model cache outlive quarkd restarts.
  pool.env.push_back("QUARK_WORKER_DATA_DIR=" +
                     (std::filesystem::path(options.data_dir) / "workers" / "{slot}").string());
  ServerMetrics* server_metrics = metrics_.get();
  worker_pool_ = std::make_unique<WorkerPool>(
      pool, [server_metrics](const std::string&, int) { server_metrics->worker_restarts.Increment(); });
  absl::Status status = worker_pool_->Start();
  if (!status.ok()) return status;
  WorkerPool* workers = worker_pool_.get();
  scheduler_->SetWorkerKiller([workers](const std::string& worker_id) { workers->Kill(worker_id); });
  return absl::OkStatus();
}

absl::Status QuarkServer::StartExecutor(const ServerOptions& options) {
  if (options.executor.empty() || options.executor == "local") return absl::OkStatus();
  if (options.executor != "slurm") {
    return absl::InvalidArgumentError(absl::StrCat("executor: \"", options.executor, "\" is neither local nor slurm"));
  }
  SlurmExecutorOptions slurm = options.slurm;
  if (slurm.server_address.empty()) slurm.server_address = grpc_address_;
  if (slurm.work_dir.empty()) slurm.work_dir = (std::filesystem::path(options.data_dir) / "slurm").string();
  if (slurm.worker_command.empty()) slurm.worker_command = DefaultWorkerBinary();
  if (auth_->enabled() && slurm.token_file.empty()) {
    return absl::InvalidArgumentError(
        "slurm-token-file: required with --tokens-file (the Slurm workers need a token of role worker)");
  }
  absl::StatusOr<std::unique_ptr<SlurmExecutor>> executor =
      SlurmExecutor::Start(std::move(slurm), store_.get(), scheduler_.get());
  if (!executor.ok()) return executor.status();
  slurm_ = std::move(*executor);
  return absl::OkStatus();
}

void QuarkServer::StartRetention(const ServerOptions& options, Clock* clock) {
  if (!options.retention.enabled()) return;
  AccessControl* access = access_.get();
  retention_ = std::make_unique<JobRetention>(
      store_.get(), clock, options.retention,
      [access](const quark::v1::Job& job, int64_t freed_bytes, const std::string& reason) {
        // Audited as DeleteJob audits, under quarkd's own principal in the job's tenant.
        Principal system{kRetentionPrincipal, job.tenant(), Role::kAdmin, false};
        access->Audit(system, "delete", job.id(), absl::OkStatus(),
                      absl::StrCat("tenant=", job.tenant(), " freed_bytes=", freed_bytes, " retention: ", reason));
        log::Get("server")->info("job={} deleted by retention: {} ({} bytes freed)", job.id(), reason, freed_bytes);
      });
  JobRetention* retention = retention_.get();
  retention_thread_ = std::thread([this, retention] {
    do {
      retention->MaybeSweep([this] { return stop_.HasBeenNotified(); });  // the first call sweeps at once
    } while (!stop_.WaitForNotificationWithTimeout(kRetentionCheckInterval));
  });
}

int QuarkServer::metrics_port() const { return exposer_ ? exposer_->port() : 0; }

void QuarkServer::Wait() { stopped_.WaitForNotification(); }

void QuarkServer::Drain() {
  if (stopped_.HasBeenNotified() || !scheduler_) return;
  if (grpc_server_) {
    grpc_server_->GetHealthCheckService()->SetServingStatus("quark.v1.QuantizationService", false);
    grpc_server_->GetHealthCheckService()->SetServingStatus("", false);
  }
  scheduler_->StopLeasing();
  absl::Time deadline = absl::Now() + drain_grace_;
  int running = scheduler_->LocalRunningJobs();
  log::Get("server")->info("job=- draining: no new leases; {} running jobs get up to {}", running,
                           absl::FormatDuration(drain_grace_));
  while (running > 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
    running = scheduler_->LocalRunningJobs();
  }
  if (running > 0) {
    log::Get("server")->warn("job=- drain grace over: {} jobs are handed back", running);
    // Local workers stop first, while the gRPC port still takes their hand-back completions.
    if (worker_pool_) worker_pool_->Stop();
  }
  Shutdown();
}

void QuarkServer::Shutdown() {
  absl::MutexLock lock(&shutdown_mu_);
  if (stopped_.HasBeenNotified()) return;
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (ticker_.joinable()) ticker_.join();
  if (retention_thread_.joinable()) retention_thread_.join();
  // Slurm workers first: scancel sends them SIGTERM, and a job handed back before the port closes is requeued
  // at once (otherwise when its lease expires).
  if (slurm_) slurm_->Stop();
  if (scheduler_) {
    scheduler_->SetWorkerKiller(nullptr);
    scheduler_->Shutdown();
  }
  if (grpc_server_) grpc_server_->GetHealthCheckService()->Shutdown();  // NOT_SERVING while draining
  if (grpc_server_) grpc_server_->Shutdown(absl::ToChronoTime(absl::Now() + kShutdownGrace));
  if (worker_pool_) worker_pool_->Stop();
  if (pg_store_ != nullptr) pg_store_->StopListening();
  if (exposer_) exposer_->Stop();
  log::Get("server")->info("job=- quarkd stopped");
  stopped_.Notify();
}

QuarkServer::~QuarkServer() { Shutdown(); }

}  // namespace quark::server
