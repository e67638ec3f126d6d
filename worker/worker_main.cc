// The whole of quark-worker's main() but the engine: flags, storage, runners, the agent, signals.
//   quark-worker --server HOST:PORT [--worker-id ID] [--slots N] [--devices cpu,cuda:0] [--data-dir DIR]
//                [--allowed-roots DIR[,DIR]] [--cache-max-gb G] [--test-mode noop|sleep:SECONDS|copy]
//                [--token TOKEN] [--tls-ca CA.pem [--tls-cert CERT.pem --tls-key KEY.pem]]
// Every flag also reads QUARK_WORKER_<FLAG> from the environment. S3 settings come from the AWS environment
// variables or ~/.aws files (worker/storage/s3_config.h); a lease carrying its tenant's storage credentials
// uses those keys instead, for that job only (worker/lease_storage.h).
#include <signal.h>

#include <cstdlib>
#include <iostream>
#include <thread>

#include <CLI/CLI.hpp>

#include "core/base/ed25519.h"
#include "core/base/log.h"
#include "worker/copy_pipeline.h"
#include "worker/quantize_job_runner.h"
#include "worker/storage/model_cache.h"
#include "worker/storage/routing_object_store.h"
#include "worker/test_runners.h"
#include "worker/worker_agent.h"
#include "worker/worker_main.h"

namespace {

namespace fs = std::filesystem;
using quark::worker::JobRunner;

struct Flags {
  quark::worker::WorkerAgentOptions agent;
  std::string data_dir;
  std::vector<std::string> allowed_roots;
  double cache_max_gb = 50;
  std::string test_mode;
  std::string log_format = "text";
  std::string log_level = "info";
  int64_t lease_wait_ms = 10000;
  double exit_when_idle_s = 0;
  bool skip_throughput_probe = false;
  std::string signing_key;  // #34: Ed25519 private key (PEM) that signs every published manifest
  std::string tasks_dir;
  // #34 item 1: per-layer checkpoints in object storage and their expiry after a failure.
  bool remote_checkpoints = true;
  int64_t checkpoint_expiry_s = 7 * 24 * 3600;
};

std::string DefaultDataDir() {
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/quark-worker";
  return "/tmp/quark-worker";
}

void AddFlags(CLI::App& app, Flags& f) {
  auto env = [](const char* name) { return std::string("QUARK_WORKER_") + name; };
  app.add_option("--server", f.agent.server_address, "quarkd's gRPC address HOST:PORT")
      ->required()->envname(env("SERVER"));
  app.add_option("--worker-id", f.agent.worker_id, "Stable worker id (default hostname:pid)")->envname(env("ID"));
  app.add_option("--slots", f.agent.slots, "Jobs run at once")->check(CLI::Range(1, 64))->envname(env("SLOTS"));
  app.add_option("--devices", f.agent.devices, "Devices announced to quarkd")->delimiter(',')->envname(env("DEVICES"));
  app.add_option("--data-dir", f.data_dir, "Work folder: job temp folders and the model cache")
      ->envname(env("DATA_DIR"));
  app.add_option("--allowed-roots", f.allowed_roots, "Folders file:// URIs must lie in (default: the data dir)")
      ->delimiter(',')->envname(env("ALLOWED_ROOTS"));
  app.add_option("--cache-max-gb", f.cache_max_gb, "Bound of the s3:// model download cache")
      ->check(CLI::PositiveNumber)->envname(env("CACHE_MAX_GB"));
  app.add_option("--test-mode", f.test_mode, "noop | sleep:SECONDS: run jobs without the engine; copy: jobs labelled test-copy-ms run the "
                 "real runner with a copying pipeline (worker/copy_pipeline.h), others the engine (tests)")
      ->envname(env("TEST_MODE"));
  app.add_option("--lease-wait-ms", f.lease_wait_ms, "Long-poll time of one Lease call")
      ->check(CLI::Range(int64_t{1}, int64_t{600000}))->envname(env("LEASE_WAIT_MS"));
  app.add_option("--exit-when-idle", f.exit_when_idle_s,
                 "Exit (status 0) after this many seconds without a job (Slurm, scale to zero); 0 = never")
      ->check(CLI::Range(0.0, 86400.0))->envname(env("EXIT_WHEN_IDLE"));
  app.add_option("--token", f.agent.token, "Bearer token of role worker (prefer the environment variable)")
      ->envname(env("TOKEN"));
  app.add_option("--tls-ca", f.agent.tls_ca, "PEM CAs of quarkd's certificate: connect with TLS")->envname(env("TLS_CA"));
  app.add_option("--tls-cert", f.agent.tls_cert, "PEM client certificate (mutual TLS)")->envname(env("TLS_CERT"));
  app.add_option("--tls-key", f.agent.tls_key, "PEM key of --tls-cert")->envname(env("TLS_KEY"));
  app.add_flag("--skip-throughput-probe", f.skip_throughput_probe,
               "Do not measure GEMM/Cholesky/fake-quant/disk rates at start (quarkd's estimates then use a reference)")
      ->envname(env("SKIP_THROUGHPUT_PROBE"));
  app.add_option("--tasks-dir", f.tasks_dir, "lm-eval task files for jobs' evaluation.tasks (core/eval/task_docs.h)")
      ->envname(env("TASKS_DIR"));
  app.add_option("--remote-checkpoints", f.remote_checkpoints,
                 "Copy each finished layer's checkpoint below <output_uri>/.quark-checkpoints/<job id>, so that a "
                 "retry on any worker resumes (true|false)")
      ->envname(env("REMOTE_CHECKPOINTS"));
  app.add_option("--checkpoint-expiry-s", f.checkpoint_expiry_s,
                 "Seconds after its newest layer that a failed job's remote checkpoint is deleted instead of resumed")
      ->check(CLI::NonNegativeNumber)
      ->envname(env("CHECKPOINT_EXPIRY_S"));
  app.add_option("--log-format", f.log_format, "text or json")->check(CLI::IsMember({"text", "json"}));
  app.add_option("--log-level", f.log_level, "trace, debug, info, warn, error");
  app.add_option("--signing-key", f.signing_key, "Ed25519 private key (PEM): sign every published manifest.json")
      ->envname(env("SIGNING_KEY"));
}

// The real runner: storage for file:// (confined) and s3:// URIs, the model cache, the engine pipeline.
absl::StatusOr<std::shared_ptr<JobRunner>> MakeQuantizeRunner(const Flags& f,
                                                              const quark::worker::PipelineFactory& pipeline) {
  if (!pipeline) {
    return absl::FailedPreconditionError(
        "this worker binary has no engine pipeline; pass --test-mode noop or --test-mode sleep:SECONDS");
  }
  quark::storage::StorageOptions storage;
  for (const std::string& root : f.allowed_roots) storage.file_roots.emplace_back(root);
  if (storage.file_roots.empty()) storage.file_roots.emplace_back(f.data_dir);
  absl::StatusOr<quark::storage::S3Config> s3 = quark::storage::LoadS3Config(quark::storage::ProcessEnvironment());
  if (!s3.ok()) return s3.status();
  storage.s3 = *s3;
  std::shared_ptr<quark::storage::ObjectStore> store = quark::storage::MakeObjectStore(storage);
  auto cache = std::make_shared<quark::storage::ModelCache>(
      store, fs::path(f.data_dir) / "cache", static_cast<int64_t>(f.cache_max_gb * (1 << 30)));
  quark::worker::QuantizeJobRunnerOptions options;
  options.work_dir = f.data_dir;
  options.devices = f.agent.devices;
  options.tasks_dir = f.tasks_dir;
  options.remote_checkpoints = f.remote_checkpoints;
  options.remote_checkpoint.max_age = std::chrono::seconds(f.checkpoint_expiry_s);
  // Leases with their tenant's storage keys get a store of their own over the same roots and S3 settings.
  options.lease_stores = std::make_shared<const quark::worker::LeaseStoreFactory>(storage);
  if (!f.signing_key.empty()) {
    absl::StatusOr<std::unique_ptr<quark::Ed25519Signer>> signer = quark::Ed25519Signer::FromPemFile(f.signing_key);
    if (!signer.ok()) return absl::InvalidArgumentError("--signing-key: " + std::string(signer.status().message()));
    options.signer = std::move(*signer);
    quark::log::Get("worker")->info("signing manifests with key {}", options.signer->public_key().key_id());
  }
  return std::shared_ptr<JobRunner>(std::make_shared<quark::worker::QuantizeJobRunner>(
      options, store, cache, pipeline()));
}

absl::StatusOr<std::shared_ptr<JobRunner>> MakeRunner(const Flags& f, const quark::worker::PipelineFactory& pipeline) {
  if (f.test_mode.empty()) return MakeQuantizeRunner(f, pipeline);
  if (f.test_mode == "copy") {
    return MakeQuantizeRunner(f, [&pipeline] {
      return std::make_shared<quark::worker::CopyPipeline>(pipeline ? pipeline() : nullptr);
    });
  }
  return absl::StatusOr<std::shared_ptr<JobRunner>>(quark::worker::MakeTestRunner(f.test_mode));
}

// SIGTERM/SIGINT are blocked in every thread and taken by this one, which stops the agent outside signal context.
std::thread StartSignalThread(quark::worker::WorkerAgent& agent, const sigset_t& signals) {
  return std::thread([&agent, signals] {
    int signal = 0;
    sigwait(&signals, &signal);
    quark::log::Get("worker")->info("signal {}: stopping", signal);
    agent.Stop();
  });
}

}  // namespace

namespace quark::worker {

int WorkerMain(int argc, char** argv, const PipelineFactory& pipeline, const ThroughputProbe& probe,
               const DeviceCheck& check_device) {
  CLI::App app{"quark-worker: runs quantization jobs leased from quarkd"};
  Flags f;
  f.data_dir = DefaultDataDir();
  AddFlags(app, f);
  CLI11_PARSE(app, argc, argv);
  quark::log::Init(f.log_format == "json" ? quark::log::Format::kJson : quark::log::Format::kText, f.log_level);
  f.agent.lease_wait = std::chrono::milliseconds(f.lease_wait_ms);
  f.agent.exit_when_idle = std::chrono::milliseconds(static_cast<int64_t>(f.exit_when_idle_s * 1000));
  if (f.agent.devices.empty()) {
    std::cerr << "quark-worker: --devices: give at least one device (cpu, cuda:N)\n";
    return 2;
  }
  if (check_device && f.test_mode.empty()) {
    for (const std::string& device : f.agent.devices) {
      if (absl::Status usable = check_device(device); !usable.ok()) {
        std::cerr << "quark-worker: " << usable.message() << "\n";
        return 2;
      }
    }
  }

  absl::StatusOr<std::shared_ptr<JobRunner>> runner = MakeRunner(f, pipeline);
  if (!runner.ok()) {
    std::cerr << "quark-worker: " << runner.status().message() << "\n";
    return 2;
  }
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = quark::worker::MakeWorkerChannel(f.agent);
  if (!channel.ok()) {
    std::cerr << "quark-worker: " << channel.status().message() << "\n";
    return 2;
  }
  if (probe && f.test_mode.empty() && !f.skip_throughput_probe) f.agent.throughput = probe(f.data_dir);
  quark::worker::WorkerAgent agent(f.agent, *runner, *channel);
  std::thread signal_thread = StartSignalThread(agent, signals);
  absl::Status status = agent.Run();
  // Wake the signal thread if the agent ended on its own (a refused registration).
  kill(getpid(), SIGTERM);
  signal_thread.join();
  if (!status.ok()) {
    std::cerr << "quark-worker: " << status.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace quark::worker
