// quarkd: the quantization job daemon.
//   quarkd --data-dir DIR --listen HOST:PORT --metrics-listen HOST:PORT [--workers N] [--allowed-roots DIR[,DIR]]
// Every flag also reads an environment variable (QUARKD_<FLAG>) and a config file (--config, TOML/INI keys
// named like the flags; see deploy/quarkd.toml).
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <thread>

#include <CLI/CLI.hpp>

#include "core/base/crash_report.h"
#include "core/base/log.h"
#include "server/log_text.h"
#include "server/quark_server.h"

namespace {

struct Flags {
  quark::server::ServerOptions server;
  std::string log_format = "text";
  std::string log_level = "info";
  std::string ready_file;
  int64_t heartbeat_interval_ms = 1000;
  int64_t lease_timeout_ms = 15000;
  int64_t cancel_grace_ms = 5000;
  int max_attempts = 3;
  int64_t drain_grace_ms = 20000;
  double retain_finished_jobs_days = 0;  // 0: keep finished jobs until DeleteJob
  double retention_sweep_minutes = 60;
  int retain_finished_jobs = 0;  // per tenant; 0: no count limit
  double slurm_idle_exit_s = 60;
  int64_t slurm_poll_ms = 2000;
};

// --executor slurm: batch workers started through sbatch for queued jobs (server/workers/slurm_executor.h).
void AddSlurmFlags(CLI::App& app, Flags& f) {
  quark::server::SlurmExecutorOptions& s = f.server.slurm;
  app.add_option("--executor", f.server.executor,
                 "local (the --workers pool) or slurm (also sbatch workers for queued jobs; --workers defaults to 0)")
      ->check(CLI::IsMember({"local", "slurm"}))->envname("QUARKD_EXECUTOR")->capture_default_str();
  app.add_option("--slurm-worker-command", s.worker_command, "quark-worker as the Slurm nodes see it (default: "
                 "beside quarkd)")->envname("QUARKD_SLURM_WORKER_COMMAND");
  app.add_option("--slurm-worker-arg", s.worker_args, "Extra argument for every Slurm worker (repeatable)");
  app.add_option("--slurm-server-address", s.server_address, "HOST:PORT the Slurm workers dial (default: --listen)")
      ->envname("QUARKD_SLURM_SERVER_ADDRESS");
  app.add_option("--slurm-token-file", s.token_file, "File with a worker token, read on the node (needed with "
                 "--tokens-file)")->envname("QUARKD_SLURM_TOKEN_FILE");
  app.add_option("--slurm-partition", s.partition, "sbatch --partition (default: the cluster's)")
      ->envname("QUARKD_SLURM_PARTITION");
  app.add_option("--slurm-max-workers", s.max_workers, "Slurm workers alive at once (pending or running)")
      ->check(CLI::Range(1, 10000))->envname("QUARKD_SLURM_MAX_WORKERS")->capture_default_str();
  app.add_option("--slurm-idle-exit-s", f.slurm_idle_exit_s,
                 "Workers leave after this long without a job (quark-worker --exit-when-idle); unneeded pending "
                 "ones are scancelled after it")
      ->check(CLI::Range(0.1, 86400.0))->envname("QUARKD_SLURM_IDLE_EXIT_S")->capture_default_str();
  app.add_option("--slurm-cpus", s.default_cpus, "sbatch --cpus-per-task for jobs whose resources name none")
      ->check(CLI::Range(1, 4096))->envname("QUARKD_SLURM_CPUS")->capture_default_str();
  app.add_option("--slurm-time-limit", s.time_limit, "sbatch --time for jobs without a deadline (default: the "
                 "partition's)")->envname("QUARKD_SLURM_TIME_LIMIT");
  app.add_option("--slurm-sbatch-arg", s.sbatch_args, "Extra sbatch argument, e.g. --slurm-sbatch-arg=--qos=low "
                 "(repeatable)");
  app.add_option("--slurm-poll-ms", f.slurm_poll_ms, "How often the queue and squeue are compared")
      ->check(CLI::Range(int64_t{100}, int64_t{600000}))->capture_default_str();
}

void AddFlags(CLI::App& app, Flags& f) {
  app.set_config("--config", "", "TOML/INI file with any of these options");
  app.add_option("--data-dir", f.server.data_dir, "Folder of the job store (quarkd.db)")->required()
      ->envname("QUARKD_DATA_DIR");
  app.add_option("--store", f.server.store,
                 "sqlite (default: DATA_DIR/quarkd.db) or postgres://USER:PASSWORD@HOST/DB (shared by replicas)")
      ->envname("QUARKD_STORE");
  app.add_option("--replica-id", f.server.replica_id, "This replica's name with a shared store (default: hostname)")
      ->envname("QUARKD_REPLICA_ID");
  app.add_option("--drain-grace-ms", f.drain_grace_ms, "SIGTERM: running jobs may finish for this long")
      ->check(CLI::Range(int64_t{0}, int64_t{86400000}))->envname("QUARKD_DRAIN_GRACE_MS")->capture_default_str();
  app.add_option("--listen", f.server.listen, "gRPC HOST:PORT (port 0: any free port)")
      ->envname("QUARKD_LISTEN")->capture_default_str();
  app.add_option("--metrics-listen", f.server.metrics_listen, "/metrics HOST:PORT; empty disables")
      ->envname("QUARKD_METRICS_LISTEN")->capture_default_str();
  app.add_flag("--expect-gpu-workers", f.server.expect_gpu_workers,
               "GPU workers join from elsewhere (Kubernetes): GPU jobs queue even when none is registered")
      ->envname("QUARKD_EXPECT_GPU_WORKERS");
  app.add_flag("--trust-object-store", f.server.trust_object_store,
               "Dedup may hand out s3:// results on the worker's digests (quarkd cannot re-check them)")
      ->envname("QUARKD_TRUST_OBJECT_STORE");
  app.add_option("--workers", f.server.workers, "Local workers: -1 = one per visible GPU or one CPU worker; 0 = none")
      ->envname("QUARKD_WORKERS")->capture_default_str();
  app.add_option("--worker-binary", f.server.worker_binary, "quark-worker executable (default: beside quarkd)")
      ->envname("QUARKD_WORKER_BINARY");
  app.add_option("--worker-arg", f.server.worker_args, "Extra argument for every local worker (repeatable)");
  app.add_option("--allowed-roots", f.server.allowed_roots, "Folders that file:// URIs must lie in")
      ->delimiter(',')->envname("QUARKD_ALLOWED_ROOTS");
  app.add_option("--log-format", f.log_format, "text or json")->check(CLI::IsMember({"text", "json"}))
      ->envname("QUARKD_LOG_FORMAT")->capture_default_str();
  app.add_option("--log-level", f.log_level, "trace, debug, info, warn, error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}))->envname("QUARKD_LOG_LEVEL");
  app.add_option("--heartbeat-interval-ms", f.heartbeat_interval_ms, "Worker heartbeat interval")
      ->check(CLI::Range(int64_t{10}, int64_t{600000}))->capture_default_str();
  app.add_option("--lease-timeout-ms", f.lease_timeout_ms, "A lease without heartbeat for this long is lost")
      ->check(CLI::Range(int64_t{50}, int64_t{3600000}))->capture_default_str();
  app.add_option("--cancel-grace-ms", f.cancel_grace_ms, "A cancelled job's worker is killed after this")
      ->check(CLI::Range(int64_t{0}, int64_t{600000}))->capture_default_str();
  app.add_option("--max-attempts", f.max_attempts, "Attempts of a job whose spec sets none")
      ->check(CLI::Range(1, 100))->capture_default_str();
  app.add_option("--max-message-bytes", f.server.max_message_bytes, "Largest gRPC message received or sent")
      ->check(CLI::Range(1 << 16, 1 << 30))->envname("QUARKD_MAX_MESSAGE_BYTES")->capture_default_str();
  app.add_option("--ready-file", f.ready_file, "Written once serving: {\"grpc\": ADDR, \"metrics_port\": N}");
  app.add_option("--tls-cert", f.server.tls_cert, "PEM certificate chain of the gRPC port (TLS; SIGHUP reloads it)")
      ->envname("QUARKD_TLS_CERT");
  app.add_option("--tls-key", f.server.tls_key, "PEM private key of --tls-cert")->envname("QUARKD_TLS_KEY");
  app.add_option("--signing-key", f.server.signing_key,
                 "Ed25519 private key (PEM): local workers sign manifest.json with it; quarkctl key prints its public half")
      ->envname("QUARKD_SIGNING_KEY");
  app.add_option("--tls-client-ca", f.server.tls_client_ca, "PEM CAs: require client certificates (mutual TLS)")
      ->envname("QUARKD_TLS_CLIENT_CA");
  app.add_flag("--insecure", f.server.insecure, "Allow plaintext gRPC on a non-loopback --listen address")
      ->envname("QUARKD_INSECURE");
  app.add_option("--tokens-file", f.server.tokens_file,
                 "Bearer tokens (SHA-256) -> tenant + role, tenant policies; reloaded on change. Empty: no auth")
      ->envname("QUARKD_TOKENS_FILE");
  app.add_option("--metrics-token-file", f.server.metrics_token_file,
                 "File holding the bearer token /metrics requires")->envname("QUARKD_METRICS_TOKEN_FILE");
  // #29 retention (server/scheduler/job_retention.h).
  app.add_option("--retain-finished-jobs-days", f.retain_finished_jobs_days,
                 "Delete finished (succeeded, failed, cancelled) jobs this many days after they finished, as DeleteJob "
                 "does (artifacts stay); 0 keeps them")
      ->check(CLI::Range(0.0, 36500.0))->envname("QUARKD_RETAIN_FINISHED_JOBS_DAYS")->capture_default_str();
  app.add_option("--retain-finished-jobs", f.retain_finished_jobs,
                 "Each tenant keeps at most this many finished jobs (its newest); older ones are deleted as DeleteJob "
                 "does; 0: no count limit")
      ->check(CLI::Range(0, 100000000))->envname("QUARKD_RETAIN_FINISHED_JOBS")->capture_default_str();
  app.add_option("--retention-sweep-minutes", f.retention_sweep_minutes,
                 "How often the retention sweep runs (also once at start)")
      ->check(CLI::Range(0.01, 10080.0))->envname("QUARKD_RETENTION_SWEEP_MINUTES")->capture_default_str();
  AddSlurmFlags(app, f);
}

// Written to a temporary name and renamed, so a reader never sees half a file.
bool WriteReadyFile(const std::string& path, const quark::server::QuarkServer& server) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << "{\"grpc\": \"" << server.grpc_address() << "\", \"grpc_port\": " << server.grpc_port()
        << ", \"metrics_port\": " << server.metrics_port() << "}\n";
    if (!out) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  quark::InstallCrashReport();  // quarkd links no LibTorch, so it installs the report itself
  CLI::App app{"quarkd: quantization jobs over gRPC"};
  Flags flags;
  AddFlags(app, flags);
  CLI11_PARSE(app, argc, argv);
  quark::log::Init(flags.log_format == "json" ? quark::log::Format::kJson : quark::log::Format::kText,
                   flags.log_level);
  flags.server.scheduler.heartbeat_interval = absl::Milliseconds(flags.heartbeat_interval_ms);
  flags.server.scheduler.lease_timeout = absl::Milliseconds(flags.lease_timeout_ms);
  flags.server.scheduler.cancel_grace = absl::Milliseconds(flags.cancel_grace_ms);
  flags.server.scheduler.default_max_attempts = flags.max_attempts;
  flags.server.drain_grace = absl::Milliseconds(flags.drain_grace_ms);
  if (flags.retain_finished_jobs_days > 0) {
    flags.server.retention.max_age = absl::Hours(24 * flags.retain_finished_jobs_days);
  }
  flags.server.retention.max_finished_per_tenant = flags.retain_finished_jobs;
  flags.server.retention.sweep_interval = absl::Minutes(flags.retention_sweep_minutes);
  flags.server.slurm.idle_exit = absl::Seconds(flags.slurm_idle_exit_s);
  flags.server.slurm.poll_interval = absl::Milliseconds(flags.slurm_poll_ms);
  // With Slurm providing the workers, no local one unless asked for.
  if (flags.server.executor == "slurm" && app.get_option("--workers")->count() == 0 &&
      std::getenv("QUARKD_WORKERS") == nullptr) {
    flags.server.workers = 0;
  }

  // SIGINT/SIGTERM/SIGHUP go to one thread (sigwait): SIGHUP reloads the certificate and tokens, the others shut
  // the server down. Every other thread blocks them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  absl::StatusOr<std::unique_ptr<quark::server::QuarkServer>> server = quark::server::QuarkServer::Start(flags.server);
  if (!server.ok()) {
    quark::log::Get("server")->error("job=- quarkd failed to start: {}", quark::server::ForLog(server.status().ToString()));
    return 1;
  }
  if (!flags.ready_file.empty() && !WriteReadyFile(flags.ready_file, **server)) {
    quark::log::Get("server")->error("job=- cannot write ready-file {}", flags.ready_file);
    return 1;
  }
  quark::server::QuarkServer* raw = server->get();
  std::thread signal_thread([&signals, raw] {
    int signal_number = 0;
    while (sigwait(&signals, &signal_number) == 0 && signal_number == SIGHUP) {
      absl::Status status = raw->ReloadSecurity();
      if (status.ok()) {
        quark::log::Get("server")->info("job=- SIGHUP: certificate and tokens reloaded");
      } else {
        quark::log::Get("server")->error("job=- SIGHUP: reload refused, the previous files stay in use: {}",
                                         quark::server::ForLog(status.ToString()));
      }
    }
    if (signal_number == SIGTERM) {
      // Graceful drain (Kubernetes, systemd): no new leases, running jobs finish or are handed back.
      quark::log::Get("server")->info("job=- SIGTERM: draining");
      raw->Drain();
      return;
    }
    quark::log::Get("server")->info("job=- signal {}: shutting down", signal_number);
    raw->Shutdown();
  });
  raw->Wait();
  // A shutdown not caused by a signal: wake the signal thread so it can be joined.
  pthread_kill(signal_thread.native_handle(), SIGTERM);
  signal_thread.join();
  return 0;
}
