// quarkd benchmarks, printed as a table:
//   1. submit -> RUNNING latency with an idle worker parked in Lease (goal < 100 ms)
//   2. GetJob throughput and latency percentiles with N concurrent clients
//   3. scheduling N queued no-op jobs through workers that complete instantly
//   4. one client's sequential GetJob, SubmitJob and ValidateConfig calls: mean microseconds per call
// The server runs in this process (SQLite store in a temp dir, loopback gRPC); workers and clients are real
// gRPC clients of the generated stubs. With --tls-cert/--tls-key/--tls-ca and --tokens-file (+ --token for the
// clients, --worker-token for the workers) the same runs go over TLS with bearer tokens checked on every call
// (bench/server/secure_bench.sh compares both).
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/base/log.h"
#include "core/config/presets.h"
#include "quark/v1/service.grpc.pb.h"
#include "quark/v1/worker.grpc.pb.h"
#include "server/quark_server.h"

namespace {

namespace pb = quark::v1;
namespace wpb = quark::v1::internal;
using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// How clients and workers reach the server: plaintext without tokens, or TLS with bearer tokens.
struct Transport {
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  std::string client_token;  // "authorization: Bearer ..." on every client call when set
  std::string worker_token;  // ... on every worker call
};
Transport transport;

std::shared_ptr<grpc::Channel> Channel(const std::string& address, const grpc::ChannelArguments& args = {}) {
  return grpc::CreateCustomChannel(address, transport.credentials, args);
}

void AddToken(grpc::ClientContext& context, const std::string& token) {
  if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t index = std::min(values.size() - 1, static_cast<size_t>(p / 100.0 * values.size()));
  return values[index];
}

pb::SubmitJobRequest NoOpJob(const std::string& root) {
  pb::SubmitJobRequest request;
  request.mutable_spec()->set_model_uri("file://" + root + "/model");
  request.mutable_spec()->set_output_uri("file://" + root + "/out");
  request.mutable_spec()->set_preset(quark::AllPresets().front().name);
  return request;
}

// A worker thread: leases, completes at once, repeats until `stop`. Records when each lease arrived.
void RunInstantWorker(const std::string& address, const std::string& id, std::atomic<bool>* stop,
                      std::atomic<int>* completed, std::vector<Clock::time_point>* lease_times) {
  auto stub = wpb::WorkerService::NewStub(Channel(address));
  grpc::ClientContext register_context;
  AddToken(register_context, transport.worker_token);
  wpb::RegisterRequest reg;
  reg.set_worker_id(id);
  reg.set_slots(1);
  wpb::RegisterResponse registered;
  stub->Register(&register_context, reg, &registered);
  while (!stop->load()) {
    grpc::ClientContext context;
    AddToken(context, transport.worker_token);
    wpb::LeaseRequest request;
    request.set_worker_id(id);
    request.set_wait_ms(200);
    wpb::LeaseResponse lease;
    if (!stub->Lease(&context, request, &lease).ok() || lease.lease_id().empty()) continue;
    if (lease_times != nullptr) lease_times->push_back(Clock::now());
    grpc::ClientContext complete_context;
    AddToken(complete_context, transport.worker_token);
    wpb::CompleteRequest complete;
    complete.set_lease_id(lease.lease_id());
    complete.set_success(true);
    wpb::CompleteResponse done;
    stub->Complete(&complete_context, complete, &done);
    completed->fetch_add(1);
  }
}

void PrintRow(const char* name, const std::string& value, const std::string& note) {
  std::printf("| %-44s | %-30s | %-30s |\n", name, value.c_str(), note.c_str());
}

std::string Fmt(const char* format, double a, double b = 0, double c = 0) {
  char buffer[128];
  std::snprintf(buffer, sizeof(buffer), format, a, b, c);
  return buffer;
}

void BenchSubmitToRunning(const std::string& address, const std::string& root, int rounds) {
  auto api = pb::QuantizationService::NewStub(Channel(address));
  std::atomic<bool> stop{false};
  std::atomic<int> completed{0};
  std::vector<Clock::time_point> lease_times;
  lease_times.reserve(rounds);
  std::thread worker(RunInstantWorker, address, "bench-idle", &stop, &completed, &lease_times);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let the worker park in Lease
  std::vector<double> latencies;
  for (int i = 0; i < rounds; ++i) {
    Clock::time_point start = Clock::now();
    grpc::ClientContext context;
    AddToken(context, transport.client_token);
    pb::Job job;
    api->SubmitJob(&context, NoOpJob(root), &job);
    while (completed.load() < i + 1) std::this_thread::yield();
    latencies.push_back(Ms(lease_times[i] - start));
    // Idle again: the worker is back in its long poll before the next submission.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  stop = true;
  worker.join();
  PrintRow("submit -> RUNNING (idle worker), ms", Fmt("p50 %.2f  p99 %.2f  max %.2f", Percentile(latencies, 50),
                                                        Percentile(latencies, 99), *std::max_element(latencies.begin(), latencies.end())),
           Fmt("%.0f submissions; goal < 100 ms", rounds));
}

void BenchGetJob(const std::string& address, const std::string& root, int clients, double seconds) {
  auto api = pb::QuantizationService::NewStub(Channel(address));
  std::vector<std::string> ids;
  for (int i = 0; i < 100; ++i) {
    grpc::ClientContext context;
    AddToken(context, transport.client_token);
    pb::Job job;
    api->SubmitJob(&context, NoOpJob(root), &job);
    ids.push_back(job.id());
  }
  std::vector<std::vector<double>> latencies(clients);
  std::vector<std::thread> threads;
  Clock::time_point end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      // Separate channels (distinct args) so clients do not share one HTTP/2 connection.
      grpc::ChannelArguments args;
      args.SetInt("quark.bench.client", c);
      auto stub = pb::QuantizationService::NewStub(Channel(address, args));
      for (size_t i = c; Clock::now() < end; ++i) {
        pb::GetJobRequest request;
        request.set_id(ids[i % ids.size()]);
        pb::Job job;
        grpc::ClientContext context;
        AddToken(context, transport.client_token);
        Clock::time_point start = Clock::now();
        stub->GetJob(&context, request, &job);
        latencies[c].push_back(Ms(Clock::now() - start));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<double> all;
  for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  PrintRow("GetJob, concurrent clients", Fmt("%.0f req/s", all.size() / seconds),
           Fmt("%.0f clients, %.0f s", clients, seconds));
  PrintRow("GetJob latency, ms", Fmt("p50 %.2f  p99 %.2f  max %.2f", Percentile(all, 50), Percentile(all, 99),
                                     *std::max_element(all.begin(), all.end())), "");
}

// With `processes`, the jobs are run by the server's own local worker processes (already started);
// otherwise by `workers` in-process gRPC worker threads.
void BenchScheduling(quark::server::QuarkServer* server, const std::string& root, int jobs, int workers,
                     bool processes) {
  std::string address = server->grpc_address();
  auto api = pb::QuantizationService::NewStub(Channel(address));
  Clock::time_point submit_start = Clock::now();
  for (int i = 0; i < jobs; ++i) {
    grpc::ClientContext context;
    AddToken(context, transport.client_token);
    pb::Job job;
    api->SubmitJob(&context, NoOpJob(root), &job);
  }
  double submit_s = Ms(Clock::now() - submit_start) / 1000;
  std::atomic<bool> stop{false};
  std::atomic<int> completed{0};
  Clock::time_point start = Clock::now();
  std::vector<std::thread> threads;
  for (int w = 0; w < workers && !processes; ++w) {
    threads.emplace_back(RunInstantWorker, address, "bench-" + std::to_string(w), &stop, &completed, nullptr);
  }
  auto finished = [&] {
    if (!processes) return completed.load() >= jobs;
    grpc::ClientContext context;
    AddToken(context, transport.client_token);
    pb::ListJobsRequest request;
    request.add_states(pb::JOB_STATE_QUEUED);
    request.add_states(pb::JOB_STATE_RUNNING);
    request.set_page_size(1);
    pb::ListJobsResponse response;
    return api->ListJobs(&context, request, &response).ok() && response.jobs_size() == 0;
  };
  while (!finished()) std::this_thread::sleep_for(std::chrono::milliseconds(processes ? 50 : 1));
  double run_s = Ms(Clock::now() - start) / 1000;
  stop = true;
  for (std::thread& t : threads) t.join();
  PrintRow("SubmitJob, sequential", Fmt("%.0f jobs/s", jobs / submit_s), Fmt("%.0f jobs in %.2f s", jobs, submit_s));
  PrintRow("schedule queued no-op jobs to completion", Fmt("%.0f jobs/s", jobs / run_s),
           Fmt(processes ? "%.0f jobs, %.0f worker procs, %.2f s" : "%.0f jobs, %.0f workers, %.2f s", jobs,
               workers, run_s));
}

// One client, one connection, calls back to back: the mean cost of a call, where TLS and token checks show.
void BenchSequentialCalls(const std::string& address, const std::string& root, int calls) {
  auto api = pb::QuantizationService::NewStub(Channel(address));
  pb::Job job;
  {
    grpc::ClientContext context;
    AddToken(context, transport.client_token);
    api->SubmitJob(&context, NoOpJob(root), &job);  // also opens the connection (and the TLS session)
  }
  pb::GetJobRequest get;
  get.set_id(job.id());
  Clock::time_point start = Clock::now();
  int failed = 0;
  for (int i = 0; i < calls; ++i) {
    grpc::ClientContext context;
    AddToken(context, transport.client_token);
    pb::Job out;
    failed += api->GetJob(&context, get, &out).ok() ? 0 : 1;
  }
  double get_us = Ms(Clock::now() - start) * 1000 / calls;
  start = Clock::now();
  for (int i = 0; i < calls; ++i) {
    grpc::ClientContext context;
    AddToken(context, transport.client_token);
    pb::Job out;
    failed += api->SubmitJob(&context, NoOpJob(root), &out).ok() ? 0 : 1;
  }
  double submit_us = Ms(Clock::now() - start) * 1000 / calls;
  pb::ValidateConfigRequest validate;
  // No model: the Config (preset) is resolved and checked, with every request-size check (#29) on the way.
  validate.set_preset(quark::AllPresets().front().name);
  start = Clock::now();
  for (int i = 0; i < calls; ++i) {
    grpc::ClientContext context;
    AddToken(context, transport.client_token);
    pb::ValidateConfigResponse out;
    failed += api->ValidateConfig(&context, validate, &out).ok() ? 0 : 1;
  }
  double validate_us = Ms(Clock::now() - start) * 1000 / calls;
  PrintRow("GetJob, one client, sequential, us/call", Fmt("%.1f", get_us), Fmt("%.0f calls, %.0f failed", calls, failed));
  PrintRow("SubmitJob, one client, sequential, us/call", Fmt("%.1f", submit_us), Fmt("%.0f calls", calls));
  PrintRow("ValidateConfig, one client, sequential, us/call", Fmt("%.1f", validate_us), Fmt("%.0f calls", calls));
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"quarkd benchmarks"};
  int rounds = 200, clients = 32, jobs = 10000, workers = 4;
  double seconds = 3;
  std::string worker_binary;
  std::vector<std::string> worker_args;
  app.add_option("--rounds", rounds, "submit->RUNNING samples")->capture_default_str();
  app.add_option("--clients", clients, "concurrent GetJob clients")->capture_default_str();
  app.add_option("--seconds", seconds, "GetJob run time")->capture_default_str();
  app.add_option("--jobs", jobs, "queued no-op jobs to schedule")->capture_default_str();
  app.add_option("--workers", workers, "instant workers for the scheduling run")->capture_default_str();
  app.add_option("--worker-binary", worker_binary,
                 "Run the scheduling benchmark through this many local worker processes of this binary "
                 "(e.g. quark-test-worker with --worker-arg=--test-mode --worker-arg=noop)");
  app.add_option("--worker-arg", worker_args, "Argument for each worker process (repeatable)");
  int sequential_calls = 2000;
  app.add_option("--sequential-calls", sequential_calls, "calls of the one-client sequential runs")->capture_default_str();
  bool sequential_only = false;
  app.add_flag("--sequential-only", sequential_only, "Run only the one-client sequential calls (4.)");
  std::string tls_cert, tls_key, tls_ca, tokens_file;
  app.add_option("--tls-cert", tls_cert, "Serve TLS with this PEM certificate (with --tls-key, --tls-ca)");
  app.add_option("--tls-key", tls_key, "PEM key of --tls-cert");
  app.add_option("--tls-ca", tls_ca, "PEM CA that clients and workers verify the server with");
  app.add_option("--tokens-file", tokens_file, "quarkd tokens file: authentication on");
  app.add_option("--token", transport.client_token, "Bearer token of the clients (admin or submitter)");
  app.add_option("--worker-token", transport.worker_token, "Bearer token of the workers (role worker)");
  CLI11_PARSE(app, argc, argv);
  if (!tls_ca.empty()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = ReadFileOrEmpty(tls_ca);
    transport.credentials = grpc::SslCredentials(ssl);
  }
  quark::log::Init(quark::log::Format::kText, "warn");

  std::string root = (std::filesystem::temp_directory_path() / ("quarkd-bench-" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(root);
  quark::server::ServerOptions options;
  options.data_dir = root + "/data";
  options.listen = "127.0.0.1:0";
  options.metrics_listen = "";
  options.workers = 0;
  options.allowed_roots = {root};
  options.tls_cert = tls_cert;
  options.tls_key = tls_key;
  options.tokens_file = tokens_file;
  auto server = quark::server::QuarkServer::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "server: %s\n", server.status().ToString().c_str());
    return 1;
  }
  std::string address = (*server)->grpc_address();
  std::printf("| %-44s | %-30s | %-30s |\n", "benchmark", "result", "setup");
  std::printf("|%s|%s|%s|\n", std::string(46, '-').c_str(), std::string(32, '-').c_str(), std::string(32, '-').c_str());
  if (sequential_only) {
    BenchSequentialCalls(address, root, sequential_calls);
    (*server)->Shutdown();
    std::filesystem::remove_all(root);
    return 0;
  }
  BenchSubmitToRunning(address, root, rounds);
  BenchGetJob(address, root, clients, seconds);
  if (worker_binary.empty()) {
    BenchScheduling(server->get(), root, jobs, workers, false);
  } else {
    (*server)->Shutdown();
    options.data_dir = root + "/data-procs";
    options.workers = workers;
    options.worker_binary = worker_binary;
    options.worker_args = worker_args;
    server = quark::server::QuarkServer::Start(options);
    if (!server.ok()) {
      std::fprintf(stderr, "server: %s\n", server.status().ToString().c_str());
      return 1;
    }
    BenchScheduling(server->get(), root, jobs, workers, true);
  }
  // Last: the jobs it submits stay queued (no worker runs them), which would skew the runs above.
  BenchSequentialCalls((*server)->grpc_address(), root, sequential_calls);
  (*server)->Shutdown();
  std::filesystem::remove_all(root);
  return 0;
}
