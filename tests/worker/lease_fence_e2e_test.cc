// Self-fencing: a worker that cannot reach quarkd stops its job before quarkd can expire the lease and give the job
// to another worker. quarkd (the real executable) is frozen with SIGSTOP while an in-process agent runs a job, so
// quarkd can neither answer a heartbeat nor tell the agent its lease is lost: only the agent's own count of the
// lease timeout can stop the job. Once quarkd is thawed it expires the lease and the same agent runs the job again.
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "quark/v1/service.grpc.pb.h"
#include "tests/worker/support/quarkd.h"
#include "tests/worker/support/run_job.h"
#include "worker/job_runner.h"
#include "worker/worker_agent.h"

namespace quark::worker {
namespace {

using quark::testing::GetJob;
using quark::testing::WaitUntil;
using quark::v1::Job;

// The first run waits until it is cancelled and remembers why; later runs succeed at once.
class WaitForCancelRunner : public JobRunner {
 public:
  absl::StatusOr<quark::v1::JobResult> Run(const quark::v1::Job& /*job*/, const LeaseContext& /*lease*/,
                                           ProgressSink& progress, const CancelToken& cancel) override {
    if (runs_.fetch_add(1) > 0) return quark::v1::JobResult();
    quark::v1::Progress p;
    p.set_phase("quantize");
    p.set_fraction(0.1);
    progress.Report(p);
    running_.store(true);
    while (!cancel.WaitFor(std::chrono::milliseconds(50))) {
    }
    first_run_reason_.store(cancel.reason());
    first_run_ended_.store(true);
    return absl::CancelledError("cancelled");
  }

  std::atomic<int> runs_{0};
  std::atomic<bool> running_{false};
  std::atomic<bool> first_run_ended_{false};
  std::atomic<CancelToken::Reason> first_run_reason_{CancelToken::Reason::kNone};
};

TEST(LeaseFenceE2eTest, AWorkerCutOffFromQuarkdDropsItsJobBeforeTheLeaseCanExpire) {
  quark::testing::QuarkdOptions options;
  options.workers = 0;
  options.extra_args = {"--lease-timeout-ms", "1500"};  // the helper sets a 200 ms heartbeat
  absl::StatusOr<std::unique_ptr<quark::testing::Quarkd>> quarkd = quark::testing::Quarkd::Start(options);
  ASSERT_TRUE(quarkd.ok()) << quarkd.status();
  const std::string root = (*quarkd)->root().string();
  std::filesystem::create_directories(root + "/models/m");

  auto runner = std::make_shared<WaitForCancelRunner>();
  WorkerAgentOptions agent_options;
  agent_options.server_address = (*quarkd)->address();
  agent_options.worker_id = "fenced-agent";
  agent_options.lease_wait = std::chrono::milliseconds(300);
  agent_options.rpc_timeout = std::chrono::milliseconds(5000);  // longer than the lease: the fence must cut it short
  WorkerAgent agent(agent_options, runner);
  std::thread agent_thread([&] { EXPECT_TRUE(agent.Run().ok()); });

  auto stub = quark::v1::QuantizationService::NewStub(
      grpc::CreateChannel((*quarkd)->address(), grpc::InsecureChannelCredentials()));
  const quark::v1::SubmitJobRequest submit = quark::testing::EmptyModelJob(root, 3);
  const Job job = quark::testing::SubmitJob(*stub, submit);
  ASSERT_FALSE(job.id().empty());
  ASSERT_TRUE(WaitUntil([&] { return runner->running_.load(); }, std::chrono::seconds(60))) << (*quarkd)->Log();

  // Freeze quarkd: from now on nothing it could say reaches the agent.
  const pid_t pid = (*quarkd)->process().pid();
  ASSERT_EQ(kill(pid, SIGSTOP), 0);
  const bool ended_while_frozen = WaitUntil([&] { return runner->first_run_ended_.load(); }, std::chrono::seconds(60));
  const CancelToken::Reason reason = runner->first_run_reason_.load();
  ASSERT_EQ(kill(pid, SIGCONT), 0);
  ASSERT_TRUE(ended_while_frozen) << "the agent kept running a job whose lease it could not renew";
  EXPECT_EQ(reason, CancelToken::Reason::kLeaseLost);

  // Thawed, quarkd expires the lease and hands the job out again: the second run succeeds.
  Job done;
  ASSERT_TRUE(WaitUntil([&] { return (done = GetJob(*stub, job.id())).state() == quark::v1::JOB_STATE_SUCCEEDED; },
                        std::chrono::seconds(60)))
      << done.DebugString() << (*quarkd)->Log();
  EXPECT_EQ(done.attempts_size(), 2) << done.DebugString();
  EXPECT_EQ(runner->runs_.load(), 2);
  agent.Stop();
  agent_thread.join();
}

}  // namespace
}  // namespace quark::worker
