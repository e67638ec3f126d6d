// Two quarkd replicas (the real executable) on one real PostgreSQL, local test workers on both and one remote
// worker that can reach either: kill -9 of a replica mid-job, WatchJob across replicas, idempotent submit across
// replicas, and graceful drain on SIGTERM. Skipped only when the PostgreSQL binaries are absent.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "core/config/presets.h"
#include "quark/v1/service.grpc.pb.h"
#include "tests/server/postgres_fixture.h"
#include "tests/server/quarkd_process.h"
#include "tests/server/test_util.h"
#include "tests/support/require_peer.h"

namespace quark::server {
namespace {

namespace pb = quark::v1;
using testing::QuarkdProcess;
using testing::TempDir;
using testing::TestPostgres;
using testing::WaitFor;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class ReplicatedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (TestPostgres::BinDir().empty()) QUARK_PEER_MISSING() << "PostgreSQL is not installed (scripts/install-deps.sh)";
    ASSERT_EQ(pg_.Start(), "");
    std::filesystem::create_directories(dir_.File("models/m"));
    setenv("QUARK_TEST_WORKER_RUNS_FILE", dir_.File("runs.txt").c_str(), 1);
  }
  void TearDown() override { unsetenv("QUARK_TEST_WORKER_RUNS_FILE"); }

  std::unique_ptr<QuarkdProcess> StartReplica(const std::string& name, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"--store", pg_.Dsn(), "--replica-id", name, "--data-dir", dir_.File(name),
                                     "--listen", "127.0.0.1:0", "--metrics-listen", "", "--workers", "2",
                                     "--worker-binary", QUARK_TEST_WORKER_BINARY,
                                     "--allowed-roots", dir_.File("models") + "," + dir_.File("out"),
                                     "--heartbeat-interval-ms", "100", "--lease-timeout-ms", "1500"};
    // A flag in `extra` replaces the default of the same name (CLI11 refuses a single-value flag given twice).
    for (const std::string& flag : extra) {
      auto it = std::find(args.begin(), args.end(), flag);
      if (flag.rfind("--", 0) == 0 && it != args.end()) args.erase(it, it + 2);
    }
    args.insert(args.end(), extra.begin(), extra.end());
    auto process = std::make_unique<QuarkdProcess>();
    if (!process->Start(QUARKD_BINARY, args, dir_.File(name + ".ready"), dir_.File(name + ".log"))) return nullptr;
    return process;
  }

  static std::unique_ptr<pb::QuantizationService::Stub> Stub(const std::string& address) {
    return pb::QuantizationService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  }

  pb::Job Submit(pb::QuantizationService::Stub* stub, const std::string& request_id,
                 const std::map<std::string, std::string>& labels) {
    pb::SubmitJobRequest request;
    request.set_request_id(request_id);
    request.mutable_spec()->set_model_uri("file://" + dir_.File("models/m"));
    request.mutable_spec()->set_output_uri("file://" + dir_.File("out"));
    request.mutable_spec()->set_preset(AllPresets().front().name);
    request.mutable_spec()->mutable_labels()->insert(labels.begin(), labels.end());
    grpc::ClientContext context;
    pb::Job job;
    grpc::Status status = stub->SubmitJob(&context, request, &job);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return job;
  }

  static pb::Job Get(pb::QuantizationService::Stub* stub, const std::string& id) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    pb::GetJobRequest request;
    request.set_id(id);
    pb::Job job;
    stub->GetJob(&context, request, &job);
    return job;
  }

  // Every event WatchJob streams from `after`, until the job's final event (or 60 s).
  static std::vector<pb::JobEvent> Watch(pb::QuantizationService::Stub* stub, const std::string& id,
                                         int64_t after = 0) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    pb::WatchJobRequest request;
    request.set_id(id);
    request.set_after_sequence(after);
    auto reader = stub->WatchJob(&context, request);
    std::vector<pb::JobEvent> events;
    pb::JobEvent event;
    while (reader->Read(&event)) events.push_back(event);
    EXPECT_TRUE(reader->Finish().ok()) << id;
    return events;
  }

  std::string Logs() {
    std::string all;
    for (const char* name : {"a", "b", "c"}) {
      std::ifstream in(dir_.File(std::string(name) + ".log"));
      if (in) all += std::string(name) + ":\n" + std::string(std::istreambuf_iterator<char>(in), {});
    }
    return all.size() > 20000 ? all.substr(all.size() - 20000) : all;
  }

  TestPostgres pg_;
  TempDir dir_;
};

struct WorkerRun {
  std::string worker;
  int64_t start = 0;
  int64_t end = -1;  // -1: never ended (its process was killed)
  std::string outcome;
};

std::map<std::string, std::vector<WorkerRun>> ReadRuns(const std::string& path) {
  std::map<std::string, std::vector<WorkerRun>> runs;
  std::ifstream in(path);
  std::string what, job, worker, pid, outcome;
  int64_t ms = 0;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    outcome.clear();
    fields >> what >> job >> worker >> pid >> ms >> outcome;
    std::vector<WorkerRun>& list = runs[job];
    if (what == "start") {
      list.push_back(WorkerRun{worker + "/" + pid, ms});
    } else {
      for (WorkerRun& run : list) {
        if (run.worker == worker + "/" + pid && run.end < 0) {
          run.end = ms;
          run.outcome = outcome;
        }
      }
    }
  }
  return runs;
}

TEST_F(ReplicatedTest, KillingAReplicaMidJobLosesNothingAndRunsNothingTwice) {
  auto a = StartReplica("a");
  ASSERT_NE(a, nullptr);
  auto b = StartReplica("b");
  ASSERT_NE(b, nullptr);
  auto stub_a = Stub(a->address());
  auto stub_b = Stub(b->address());
  // A remote worker that dials either replica (pick_first: A, then B once A is gone).
  pid_t remote = fork();
  if (remote == 0) {
    std::string target = "ipv4:" + a->address() + "," + b->address();
    execl(QUARK_TEST_WORKER_BINARY, QUARK_TEST_WORKER_BINARY, "--server", target.c_str(), "--worker-id", "remote-1",
          nullptr);
    _exit(127);
  }
  constexpr int kJobs = 14;
  std::vector<std::string> ids;
  for (int i = 0; i < kJobs; ++i) {
    pb::QuantizationService::Stub* stub = i % 2 ? stub_b.get() : stub_a.get();
    ids.push_back(Submit(stub, "req-" + std::to_string(i), {{"test-mode", "sleep"}, {"test-sleep-ms", "1200"}}).id());
  }
  // Idempotent across replicas: the same request ids through the other replica answer the same jobs.
  for (int i = 0; i < 4; ++i) {
    pb::QuantizationService::Stub* other = i % 2 ? stub_a.get() : stub_b.get();
    EXPECT_EQ(Submit(other, "req-" + std::to_string(i), {}).id(), ids[i]);
  }
  // Live watchers on B for jobs submitted through A (their events are written through A's workers too).
  std::vector<std::vector<pb::JobEvent>> watched(4);
  std::vector<std::thread> watchers;
  for (int i = 0; i < 4; ++i) {
    watchers.emplace_back([&, i] { watched[i] = Watch(stub_b.get(), ids[2 * i]); });
  }
  // Kill A once one of its own workers runs a job.
  ASSERT_TRUE(WaitFor([&] {
    for (const std::string& id : ids) {
      pb::Job job = Get(stub_b.get(), id);
      if (job.state() == pb::JOB_STATE_RUNNING && job.worker_id().rfind("a.local-", 0) == 0) return true;
    }
    return false;
  })) << Logs();
  int64_t killed_at = NowMs();
  a->Kill9();
  ASSERT_TRUE(WaitFor(
      [&] {
        for (const std::string& id : ids) {
          if (Get(stub_b.get(), id).state() != pb::JOB_STATE_SUCCEEDED) return false;
        }
        return true;
      },
      std::chrono::seconds(90)))
      << Logs();
  for (auto& t : watchers) t.join();
  kill(remote, SIGKILL);
  waitpid(remote, nullptr, 0);

  int requeued = 0;
  std::map<std::string, std::vector<WorkerRun>> runs = ReadRuns(dir_.File("runs.txt"));
  for (const std::string& id : ids) {
    pb::Job job = Get(stub_b.get(), id);
    std::vector<pb::JobEvent> log = Watch(stub_b.get(), id);  // the whole stored log, replayed
    ASSERT_FALSE(log.empty()) << id;
    int finals = 0, running = 0;
    for (size_t i = 0; i < log.size(); ++i) {
      EXPECT_EQ(log[i].sequence(), static_cast<int64_t>(i + 1)) << id << ": the log has a gap";
      if (log[i].event_case() != pb::JobEvent::kState) continue;
      if (log[i].state() == pb::JOB_STATE_RUNNING) ++running;
      if (log[i].state() == pb::JOB_STATE_SUCCEEDED) ++finals;
    }
    EXPECT_EQ(finals, 1) << id << " ended more than once";
    EXPECT_EQ(running, job.attempts_size()) << id;
    EXPECT_EQ(log.back().state(), pb::JOB_STATE_SUCCEEDED) << id;
    if (job.attempts_size() > 1) ++requeued;
    // Worker-side truth: one successful run; runs one after another, never two at once.
    std::vector<WorkerRun>& list = runs[id];
    EXPECT_EQ(std::count_if(list.begin(), list.end(), [](const WorkerRun& r) { return r.outcome == "succeeded"; }), 1)
        << id;
    std::sort(list.begin(), list.end(), [](const WorkerRun& x, const WorkerRun& y) { return x.start < y.start; });
    for (size_t i = 0; i + 1 < list.size(); ++i) {
      int64_t ended = list[i].end >= 0 ? list[i].end : killed_at;
      if (list[i].end < 0) EXPECT_EQ(list[i].worker.rfind("a.local-", 0), 0u) << id << " " << list[i].worker;
      EXPECT_LE(ended, list[i + 1].start) << id << ": " << list[i].worker << " and " << list[i + 1].worker
                                          << " ran it at once";
    }
  }
  EXPECT_GE(requeued, 1) << "the killed replica's job was not requeued";
  // The live watchers on B saw every state change of jobs whose events A's workers wrote.
  for (int i = 0; i < 4; ++i) {
    std::vector<pb::JobEvent> stored = Watch(stub_b.get(), ids[2 * i]);
    std::vector<int64_t> live_states, stored_states;
    for (const auto& e : watched[i]) {
      if (e.event_case() == pb::JobEvent::kState) live_states.push_back(e.sequence());
    }
    for (const auto& e : stored) {
      if (e.event_case() == pb::JobEvent::kState) stored_states.push_back(e.sequence());
    }
    EXPECT_EQ(live_states, stored_states) << ids[2 * i];
  }
}

TEST_F(ReplicatedTest, SigtermDrainsFinishingRunningJobsAndHandsBackTheRest) {
  // The real worker agent (quark-test-worker): on SIGTERM it hands its job back instead of failing it.
  auto a = StartReplica("a", {"--workers", "1", "--worker-binary", QUARK_AGENT_WORKER_BINARY,
                              "--worker-arg=--test-mode", "--worker-arg=sleep:1", "--drain-grace-ms", "5000"});
  ASSERT_NE(a, nullptr);
  auto stub_a = Stub(a->address());
  std::string finishing = Submit(stub_a.get(), "", {}).id();
  ASSERT_TRUE(WaitFor([&] { return Get(stub_a.get(), finishing).state() == pb::JOB_STATE_RUNNING; })) << Logs();
  std::string waiting = Submit(stub_a.get(), "", {}).id();
  a->Stop();  // SIGTERM, waits for the exit
  auto b = StartReplica("b", {"--workers", "0"});
  ASSERT_NE(b, nullptr);
  auto stub_b = Stub(b->address());
  pb::Job done = Get(stub_b.get(), finishing);
  EXPECT_EQ(done.state(), pb::JOB_STATE_SUCCEEDED) << Logs();
  EXPECT_EQ(done.attempts_size(), 1);
  EXPECT_EQ(Get(stub_b.get(), waiting).state(), pb::JOB_STATE_QUEUED) << "a draining replica leased a new job";

  // A job longer than the grace is handed back: requeued, its attempt ended "shutting down", not failed.
  auto c = StartReplica("c", {"--workers", "1", "--worker-binary", QUARK_AGENT_WORKER_BINARY,
                              "--worker-arg=--test-mode", "--worker-arg=sleep:30", "--drain-grace-ms", "300"});
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(WaitFor([&] { return Get(stub_b.get(), waiting).state() == pb::JOB_STATE_RUNNING; })) << Logs();
  c->Stop();
  pb::Job back = Get(stub_b.get(), waiting);
  EXPECT_EQ(back.state(), pb::JOB_STATE_QUEUED) << Logs();
  ASSERT_EQ(back.attempts_size(), 1);
  // Handed back by the worker ("shutting down"), or by quarkd when the lease's answer was cancelled on its way to
  // the stopping worker; never left to expire ("lease lost ... sent no heartbeat").
  const std::string& ended = back.attempts(0).error();
  EXPECT_TRUE(ended.find("shutting down") != std::string::npos || ended.find("did not reach it") != std::string::npos)
      << ended << "\n"
      << Logs();
}

}  // namespace
}  // namespace quark::server
