// quark-worker --exit-when-idle S (what a Slurm batch job or a scale-to-zero pod runs): the real agent
// (quark-test-worker) against the real quarkd runs the queued job, then exits with status 0 once idle for S, and
// never while a job runs.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "core/config/presets.h"
#include "quark/v1/service.grpc.pb.h"
#include "tests/server/quarkd_process.h"
#include "tests/server/test_util.h"

namespace quark::server {
namespace {

namespace pb = quark::v1;
using testing::QuarkdProcess;
using testing::WaitFor;

TEST(WorkerIdleExitTest, RunsTheQueuedJobThenExitsOnceIdle) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.File("models/m"));
  QuarkdProcess quarkd;
  ASSERT_TRUE(quarkd.Start(QUARKD_BINARY,
                           {"--data-dir", dir.File("data"), "--listen", "127.0.0.1:0", "--metrics-listen", "",
                            "--workers", "0", "--allowed-roots", dir.File("models") + "," + dir.File("out")},
                           dir.File("ready.json"), dir.File("quarkd.log")));
  auto stub = pb::QuantizationService::NewStub(grpc::CreateChannel(quarkd.address(), grpc::InsecureChannelCredentials()));
  pb::SubmitJobRequest request;
  request.mutable_spec()->set_model_uri("file://" + dir.File("models/m"));
  request.mutable_spec()->set_output_uri("file://" + dir.File("out"));
  request.mutable_spec()->set_preset(AllPresets().front().name);
  grpc::ClientContext context;
  pb::Job job;
  ASSERT_TRUE(stub->SubmitJob(&context, request, &job).ok());

  // The job (2 s) outlasts the idle limit (1 s): the worker must not leave while it runs.
  auto started = std::chrono::steady_clock::now();
  pid_t worker = fork();
  if (worker == 0) {
    execl(QUARK_AGENT_WORKER_BINARY, QUARK_AGENT_WORKER_BINARY, "--server", quarkd.address().c_str(), "--test-mode",
          "sleep:2", "--exit-when-idle", "1", "--data-dir", dir.File("worker").c_str(), nullptr);
    _exit(127);
  }
  int status = -1;
  ASSERT_TRUE(WaitFor([&] { return waitpid(worker, &status, WNOHANG) == worker; }, std::chrono::seconds(30)));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_GE(seconds, 3.0) << "left before the job plus one idle second";
  grpc::ClientContext get_context;
  pb::GetJobRequest get;
  get.set_id(job.id());
  pb::Job done;
  ASSERT_TRUE(stub->GetJob(&get_context, get, &done).ok());
  EXPECT_EQ(done.state(), pb::JOB_STATE_SUCCEEDED);
}

}  // namespace
}  // namespace quark::server
