// A job that fails for a cause outside it (a full disk, a store that did not answer) is handed back to quarkd
// (the real executable) and runs again; a job's own error still fails it at once.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "quark/v1/service.grpc.pb.h"
#include "tests/worker/support/quarkd.h"
#include "tests/worker/support/run_job.h"
#include "worker/job_runner.h"
#include "worker/worker_agent.h"

namespace quark::worker {
namespace {

// The first run fails with `first`; later runs succeed.
class FailOnceRunner : public JobRunner {
 public:
  explicit FailOnceRunner(absl::Status first) : first_(std::move(first)) {}
  absl::StatusOr<quark::v1::JobResult> Run(const quark::v1::Job& /*job*/, const LeaseContext& /*lease*/,
                                           ProgressSink& /*progress*/, const CancelToken& /*cancel*/) override {
    if (runs_.fetch_add(1) == 0) return first_;
    return quark::v1::JobResult();
  }
  std::atomic<int> runs_{0};

 private:
  absl::Status first_;
};

quark::v1::Job RunWith(absl::Status first, int* runs) {
  quark::testing::QuarkdOptions options;
  options.workers = 0;
  absl::StatusOr<std::unique_ptr<quark::testing::Quarkd>> quarkd = quark::testing::Quarkd::Start(options);
  EXPECT_TRUE(quarkd.ok()) << quarkd.status();
  if (!quarkd.ok()) return {};
  const std::string root = (*quarkd)->root().string();
  std::filesystem::create_directories(root + "/models/m");
  auto runner = std::make_shared<FailOnceRunner>(std::move(first));
  WorkerAgentOptions agent_options;
  agent_options.server_address = (*quarkd)->address();
  agent_options.worker_id = "transient-agent";
  agent_options.lease_wait = std::chrono::milliseconds(300);
  agent_options.transient_failure_pause = std::chrono::milliseconds(50);
  WorkerAgent agent(agent_options, runner);
  std::thread agent_thread([&] { EXPECT_TRUE(agent.Run().ok()); });

  auto stub = quark::v1::QuantizationService::NewStub(
      grpc::CreateChannel((*quarkd)->address(), grpc::InsecureChannelCredentials()));
  quark::v1::SubmitJobRequest submit = quark::testing::EmptyModelJob(root, 3);
  std::vector<quark::v1::JobEvent> events;
  quark::v1::Job done = quark::testing::RunJobToEnd(*stub, submit, events, std::chrono::seconds(60));
  agent.Stop();
  agent_thread.join();
  *runs = runner->runs_.load();
  return done;
}

TEST(TransientFailureE2eTest, AFullDiskHandsTheJobBackAndItRunsAgain) {
  int runs = 0;
  quark::v1::Job done = RunWith(absl::ResourceExhaustedError("copy of a.bin: No space left on device"), &runs);
  ASSERT_EQ(done.state(), quark::v1::JOB_STATE_SUCCEEDED) << done.DebugString();
  ASSERT_EQ(done.attempts_size(), 2) << done.DebugString();
  EXPECT_NE(done.attempts(0).error().find("RESOURCE_EXHAUSTED"), std::string::npos) << done.DebugString();
  EXPECT_EQ(runs, 2);
}

TEST(TransientFailureE2eTest, AStoreThatDidNotAnswerHandsTheJobBack) {
  int runs = 0;
  quark::v1::Job done = RunWith(absl::UnavailableError("PUT s3://b/k: gave up after 5 attempts"), &runs);
  ASSERT_EQ(done.state(), quark::v1::JOB_STATE_SUCCEEDED) << done.DebugString();
  EXPECT_EQ(done.attempts_size(), 2) << done.DebugString();
}

TEST(TransientFailureE2eTest, AJobsOwnErrorStillFailsIt) {
  int runs = 0;
  quark::v1::Job done = RunWith(absl::InvalidArgumentError("spec.preset: no such scheme"), &runs);
  ASSERT_EQ(done.state(), quark::v1::JOB_STATE_FAILED) << done.DebugString();
  EXPECT_EQ(done.attempts_size(), 1);
  EXPECT_EQ(runs, 1);
}

}  // namespace
}  // namespace quark::worker
