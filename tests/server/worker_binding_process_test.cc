// Worker identity bound to its token, through the real quarkd: a worker id belongs to the worker token that
// registered it, and another worker token can neither act as that id (Register, Lease, Heartbeat) nor touch its
// leases (Heartbeat, ReportProgress, Complete): PERMISSION_DENIED, and the job stays with its worker. The real
// agent (quark-test-worker) started with the wrong token for a taken id exits refused.
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <filesystem>

#include "core/config/presets.h"
#include "tests/server/quarkd_process.h"
#include "tests/server/security_fixture.h"

namespace quark::server {
namespace {

namespace pb = quark::v1;
namespace wpb = quark::v1::internal;
using grpc::StatusCode;
using testing::Call;
using testing::TokenEntry;

constexpr char kSubmitter[] = "qk_binding_submitter_0123456789";
constexpr char kWorker1[] = "qk_binding_worker_one_0123456789";
constexpr char kWorker2[] = "qk_binding_worker_two_0123456789";

class WorkerBindingProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_.File("models/m"));
    std::filesystem::create_directories(dir_.File("out"));
    testing::WriteText(dir_.File("tokens.json"),
                       "{\"tokens\": [" + TokenEntry("ci", kSubmitter, "t", "submitter") + "," +
                           TokenEntry("gpu-1", kWorker1, "", "worker") + "," +
                           TokenEntry("gpu-2", kWorker2, "", "worker") + "]}");
    std::vector<std::string> args = {"--data-dir", dir_.File("data"), "--listen", "127.0.0.1:0",
                                     "--metrics-listen", "", "--workers", "0",
                                     "--allowed-roots", dir_.File("models") + "," + dir_.File("out"),
                                     "--tokens-file", dir_.File("tokens.json")};
    ASSERT_TRUE(quarkd_.Start(QUARKD_BINARY, args, dir_.File("ready.json"), dir_.File("quarkd.log")))
        << testing::ReadText(dir_.File("quarkd.log"));
    auto channel = testing::MakeChannel(quarkd_.address());
    api_ = pb::QuantizationService::NewStub(channel);
    workers_ = wpb::WorkerService::NewStub(channel);
  }

  grpc::Status Register(const std::string& token, const std::string& worker_id) {
    wpb::RegisterRequest request;
    request.set_worker_id(worker_id);
    request.set_slots(1);
    wpb::RegisterResponse response;
    return workers_->Register(Call(token).get(), request, &response);
  }
  grpc::Status Lease(const std::string& token, const std::string& worker_id, wpb::LeaseResponse* response) {
    wpb::LeaseRequest request;
    request.set_worker_id(worker_id);
    request.set_wait_ms(2000);
    return workers_->Lease(Call(token).get(), request, response);
  }
  grpc::Status Heartbeat(const std::string& token, const std::string& worker_id, const std::string& lease_id,
                         wpb::HeartbeatResponse* response) {
    wpb::HeartbeatRequest request;
    request.set_worker_id(worker_id);
    request.set_lease_id(lease_id);
    return workers_->Heartbeat(Call(token).get(), request, response);
  }
  grpc::Status Progress(const std::string& token, const std::string& lease_id) {
    wpb::ReportProgressRequest request;
    request.set_lease_id(lease_id);
    request.set_log("hello");
    wpb::ReportProgressResponse response;
    return workers_->ReportProgress(Call(token).get(), request, &response);
  }
  grpc::Status Complete(const std::string& token, const std::string& lease_id, bool success) {
    wpb::CompleteRequest request;
    request.set_lease_id(lease_id);
    request.set_success(success);
    if (!success) request.set_error("stolen");
    wpb::CompleteResponse response;
    return workers_->Complete(Call(token).get(), request, &response);
  }
  pb::Job Get(const std::string& id) {
    pb::GetJobRequest request;
    request.set_id(id);
    pb::Job job;
    EXPECT_TRUE(api_->GetJob(Call(kSubmitter).get(), request, &job).ok());
    return job;
  }

  testing::TempDir dir_;
  testing::QuarkdProcess quarkd_;
  std::unique_ptr<pb::QuantizationService::Stub> api_;
  std::unique_ptr<wpb::WorkerService::Stub> workers_;
};

TEST_F(WorkerBindingProcessTest, AnotherWorkerTokenCannotActAsAWorkerIdOrTouchItsLeases) {
  ASSERT_TRUE(Register(kWorker1, "box-1").ok());
  ASSERT_TRUE(Register(kWorker1, "box-1").ok()) << "the same token registers its id again (a restart)";
  grpc::Status taken = Register(kWorker2, "box-1");
  EXPECT_EQ(taken.error_code(), StatusCode::PERMISSION_DENIED) << taken.error_message();
  EXPECT_NE(taken.error_message().find("worker_id \"box-1\" belongs to another credential"), std::string::npos)
      << taken.error_message();
  ASSERT_TRUE(Register(kWorker2, "box-2").ok());

  pb::SubmitJobRequest submit;
  submit.mutable_spec()->set_model_uri("file://" + dir_.File("models/m"));
  submit.mutable_spec()->set_output_uri("file://" + dir_.File("out"));
  submit.mutable_spec()->set_preset(AllPresets().front().name);
  pb::Job job;
  ASSERT_TRUE(api_->SubmitJob(Call(kSubmitter).get(), submit, &job).ok());

  // Worker 2 cannot lease as box-1; box-1 (worker 1) gets the job.
  wpb::LeaseResponse lease;
  EXPECT_EQ(Lease(kWorker2, "box-1", &lease).error_code(), StatusCode::PERMISSION_DENIED);
  ASSERT_TRUE(Lease(kWorker1, "box-1", &lease).ok());
  ASSERT_EQ(lease.job().id(), job.id());
  const std::string lease_id = lease.lease_id();

  // Worker 2 cannot heartbeat, report on or complete box-1's lease, under its own id or box-1's.
  wpb::HeartbeatResponse beat;
  for (const char* as : {"box-2", "box-1"}) {
    grpc::Status status = Heartbeat(kWorker2, as, lease_id, &beat);
    EXPECT_EQ(status.error_code(), StatusCode::PERMISSION_DENIED) << as << ": " << status.error_message();
  }
  grpc::Status progress = Progress(kWorker2, lease_id);
  EXPECT_EQ(progress.error_code(), StatusCode::PERMISSION_DENIED) << progress.error_message();
  EXPECT_NE(progress.error_message().find("ReportProgress: lease_id"), std::string::npos) << progress.error_message();
  EXPECT_EQ(Complete(kWorker2, lease_id, false).error_code(), StatusCode::PERMISSION_DENIED);
  // Nor can worker 1 heartbeat box-1's lease while naming another of its ids.
  ASSERT_TRUE(Register(kWorker1, "box-3").ok());
  EXPECT_EQ(Heartbeat(kWorker1, "box-3", lease_id, &beat).error_code(), StatusCode::PERMISSION_DENIED);

  pb::Job running = Get(job.id());
  EXPECT_EQ(running.state(), pb::JOB_STATE_RUNNING) << running.DebugString();
  EXPECT_EQ(running.worker_id(), "box-1");

  // The holder carries on: heartbeat, progress, complete.
  ASSERT_TRUE(Heartbeat(kWorker1, "box-1", lease_id, &beat).ok());
  EXPECT_FALSE(beat.lease_lost());
  ASSERT_TRUE(Progress(kWorker1, lease_id).ok());
  ASSERT_TRUE(Complete(kWorker1, lease_id, true).ok());
  EXPECT_EQ(Get(job.id()).state(), pb::JOB_STATE_SUCCEEDED);

  // The real agent with worker 2's token cannot register as box-1: it exits with status 1 (refused).
  std::string command = std::string("timeout 10 ") + QUARK_AGENT_WORKER_BINARY + " --server " + quarkd_.address() +
                        " --worker-id box-1 --test-mode noop --lease-wait-ms 200 --data-dir " + dir_.File("agent") +
                        " --token " + kWorker2 + " > " + dir_.File("agent.log") + " 2>&1";
  int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1) << testing::ReadText(dir_.File("agent.log"));
  EXPECT_NE(testing::ReadText(dir_.File("agent.log")).find("belongs to another credential"), std::string::npos)
      << testing::ReadText(dir_.File("agent.log"));
}

}  // namespace
}  // namespace quark::server
