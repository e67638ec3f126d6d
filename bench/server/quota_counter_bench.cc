// #29: the PostgreSQL storage-quota counter under concurrent writers, without gRPC or quarkd's CPU in the way: two
// PostgresJobStores (two replicas' pools of 4 connections) on one database, THREADS threads each storing JOBS
// jobs with CreateJob (the job row and its first event: the writes a SubmitJob makes), all for one tenant (one
// counter) or thread k for tenant k. Prints jobs/s and the p50/p99 of CreateJob per mode, modes alternating.
//   quota_counter_bench --dsn postgres://... [--threads 8] [--jobs 300] [--rounds 3]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "server/store/postgres_job_store.h"

namespace {

using quark::server::PostgresJobStore;

struct Result {
  double jobs_per_second = 0;
  double p50_ms = 0, p99_ms = 0;
  int failed = 0;
};

Result Run(std::vector<PostgresJobStore*> stores, int threads, int jobs, bool one_tenant, const std::string& prefix) {
  std::mutex mu;
  std::vector<double> latencies;
  std::atomic<int> failed{0};
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::vector<double> mine;
      for (int i = 0; i < jobs; ++i) {
        quark::v1::Job job;
        job.set_id(prefix + std::to_string(t) + "-" + std::to_string(i));
        job.set_tenant(one_tenant ? "t0" : "t" + std::to_string(t));
        job.set_state(quark::v1::JOB_STATE_QUEUED);
        job.mutable_spec()->set_model_uri("file:///models/m");
        job.mutable_spec()->set_preset("fp8");
        job.mutable_created_at()->set_seconds(1800000000);
        std::vector<quark::v1::JobEvent> events(1);
        events[0].set_state(job.state());
        *events[0].mutable_job() = job;
        bool created = false;
        auto sent = std::chrono::steady_clock::now();
        if (!stores[t % stores.size()]->CreateJob(job, &events, &created).ok()) ++failed;
        mine.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - sent).count());
      }
      std::lock_guard<std::mutex> lock(mu);
      latencies.insert(latencies.end(), mine.begin(), mine.end());
    });
  }
  for (std::thread& thread : pool) thread.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::sort(latencies.begin(), latencies.end());
  auto at = [&](double q) { return latencies[static_cast<size_t>(q * (latencies.size() - 1))]; };
  return Result{threads * jobs / seconds, at(0.5), at(0.99), failed.load()};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"the storage-quota counter under concurrent writers of one tenant"};
  std::string dsn;
  int threads = 8, jobs = 300, rounds = 3;
  app.add_option("--dsn", dsn)->required();
  app.add_option("--threads", threads)->check(CLI::Range(1, 64));
  app.add_option("--jobs", jobs, "jobs per thread per run")->check(CLI::Range(1, 100000));
  app.add_option("--rounds", rounds)->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);
  auto a = PostgresJobStore::Open(dsn);
  auto b = PostgresJobStore::Open(dsn);
  if (!a.ok() || !b.ok()) {
    std::fprintf(stderr, "cannot open the store: %s\n", (a.ok() ? b.status() : a.status()).ToString().c_str());
    return 1;
  }
  std::printf("| round | tenants | jobs/s | CreateJob p50 ms | p99 ms |\n|---|---|---|---|---|\n");
  int failed = 0;
  for (int round = 1; round <= rounds; ++round) {
    for (bool one : {true, false}) {
      Result r = Run({a->get(), b->get()}, threads, jobs, one,
                     "r" + std::to_string(round) + (one ? "-one-" : "-many-"));
      failed += r.failed;
      std::printf("| %d | %s | %.0f | %.2f | %.2f |\n", round, one ? "one" : std::to_string(threads).c_str(),
                  r.jobs_per_second, r.p50_ms, r.p99_ms);
      std::fflush(stdout);
    }
  }
  if (failed > 0) std::fprintf(stderr, "%d CreateJob calls failed\n", failed);
  return failed > 0 ? 1 : 0;
}
