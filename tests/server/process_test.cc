// Faults with real processes: quarkd (the executable) supervising test workers (quark_test_worker, a real
// gRPC client of the worker protocol). kill -9 of a worker, kill -9 of quarkd, cancel, missing model.
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "core/config/presets.h"
#include "nlohmann/json.hpp"
#include "quark/v1/service.grpc.pb.h"
#include "tests/server/quarkd_process.h"
#include "tests/server/test_util.h"

namespace quark::server {
namespace {

namespace pb = quark::v1;
using testing::QuarkdProcess;
using testing::WaitFor;

class ProcessTest : public ::testing::Test {
 protected:
  void SetUp() override { std::filesystem::create_directories(dir_.File("models/m")); }

  bool StartQuarkd(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"--data-dir", dir_.File("data"), "--listen", "127.0.0.1:0",
                                     "--metrics-listen", "127.0.0.1:0", "--workers", "1",
                                     "--worker-binary", QUARK_TEST_WORKER_BINARY,
                                     "--allowed-roots", dir_.File("models") + "," + dir_.File("out"),
                                     "--heartbeat-interval-ms", "100", "--lease-timeout-ms", "3000",
                                     "--cancel-grace-ms", "500"};
    args.insert(args.end(), extra.begin(), extra.end());
    quarkd_ = std::make_unique<QuarkdProcess>();
    if (!quarkd_->Start(QUARKD_BINARY, args, dir_.File("ready.json"), dir_.File("quarkd.log"))) return false;
    stub_ = pb::QuantizationService::NewStub(
        grpc::CreateChannel(quarkd_->address(), grpc::InsecureChannelCredentials()));
    return true;
  }

  std::string Submit(const std::map<std::string, std::string>& labels, const std::string& model = "models/m") {
    pb::SubmitJobRequest request;
    request.mutable_spec()->set_model_uri("file://" + dir_.File(model));
    request.mutable_spec()->set_output_uri("file://" + dir_.File("out"));
    request.mutable_spec()->set_preset(AllPresets().front().name);
    request.mutable_spec()->mutable_labels()->insert(labels.begin(), labels.end());
    grpc::ClientContext context;
    pb::Job job;
    grpc::Status status = stub_->SubmitJob(&context, request, &job);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return job.id();
  }

  pb::Job Get(const std::string& id) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    pb::GetJobRequest request;
    request.set_id(id);
    pb::Job job;
    stub_->GetJob(&context, request, &job);
    return job;
  }

  bool WaitForState(const std::string& id, pb::JobState state) {
    return WaitFor([&] { return Get(id).state() == state; });
  }

  // The pid a test worker reports in its progress message ("pid=123"), once the job runs.
  pid_t WorkerPidOf(const std::string& id) {
    pid_t pid = -1;
    WaitFor([&] {
      std::smatch match;
      std::string message = Get(id).progress().message();
      if (!std::regex_search(message, match, std::regex("pid=([0-9]+)"))) return false;
      pid = std::stoi(match[1]);
      return true;
    });
    return pid;
  }

  std::string Log() {
    std::ifstream in(dir_.File("quarkd.log"));
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }

  testing::TempDir dir_;
  std::unique_ptr<QuarkdProcess> quarkd_;
  std::unique_ptr<pb::QuantizationService::Stub> stub_;
};

TEST_F(ProcessTest, KillNineOfAWorkerMidJobRequeuesAndTheNextAttemptSucceeds) {
  ASSERT_TRUE(StartQuarkd());
  std::string id = Submit({{"test-hang-attempts", "1"}});
  ASSERT_TRUE(WaitForState(id, pb::JOB_STATE_RUNNING)) << Log();
  pid_t worker = WorkerPidOf(id);
  ASSERT_GT(worker, 0) << Log();
  // Local workers get their own work folder through quark-worker's environment variables.
  EXPECT_NE(Get(id).progress().message().find("data_dir=" + dir_.File("data") + "/workers/local-0"),
            std::string::npos)
      << Get(id).progress().message();
  ASSERT_EQ(kill(worker, SIGKILL), 0);
  ASSERT_TRUE(WaitForState(id, pb::JOB_STATE_SUCCEEDED)) << Log();
  pb::Job job = Get(id);
  ASSERT_EQ(job.attempts_size(), 2);
  EXPECT_FALSE(job.attempts(0).error().empty());
  EXPECT_TRUE(job.attempts(1).error().empty());
}

TEST_F(ProcessTest, KillNineOfQuarkdKeepsEveryJobAndTheyAllFinishAfterRestart) {
  ASSERT_TRUE(StartQuarkd());
  std::string running = Submit({{"test-hang-attempts", "1"}});
  ASSERT_TRUE(WaitForState(running, pb::JOB_STATE_RUNNING)) << Log();
  std::vector<std::string> queued = {Submit({}), Submit({}), Submit({})};
  for (const std::string& id : queued) EXPECT_EQ(Get(id).state(), pb::JOB_STATE_QUEUED);
  quarkd_->Kill9();

  ASSERT_TRUE(StartQuarkd()) << Log();
  ASSERT_TRUE(WaitForState(running, pb::JOB_STATE_SUCCEEDED)) << Log();
  for (const std::string& id : queued) EXPECT_TRUE(WaitForState(id, pb::JOB_STATE_SUCCEEDED)) << id;
  pb::Job job = Get(running);
  ASSERT_EQ(job.attempts_size(), 2);
  EXPECT_NE(job.attempts(0).error().find("quarkd restarted"), std::string::npos) << job.attempts(0).error();
  // #29: local worker ids carry a random suffix per quarkd start (the slot, and so its data folder, stays local-0).
  EXPECT_EQ(job.attempts(0).worker_id().rfind("local-0-", 0), 0u) << job.attempts(0).worker_id();
  EXPECT_EQ(job.attempts(1).worker_id().rfind("local-0-", 0), 0u) << job.attempts(1).worker_id();
  EXPECT_NE(job.attempts(0).worker_id(), job.attempts(1).worker_id());
}

TEST_F(ProcessTest, CancelStopsARunningJobAndKillsAWorkerThatIgnoresIt) {
  ASSERT_TRUE(StartQuarkd());
  std::string polite = Submit({{"test-mode", "hang"}});
  ASSERT_TRUE(WaitForState(polite, pb::JOB_STATE_RUNNING)) << Log();
  grpc::ClientContext context;
  pb::CancelJobRequest cancel;
  cancel.set_id(polite);
  pb::Job job;
  ASSERT_TRUE(stub_->CancelJob(&context, cancel, &job).ok());
  ASSERT_TRUE(WaitForState(polite, pb::JOB_STATE_CANCELLED)) << Log();
  EXPECT_EQ(Get(polite).error(), "cancelled");

  std::string stubborn = Submit({{"test-mode", "hang-ignore-cancel"}});
  ASSERT_TRUE(WaitForState(stubborn, pb::JOB_STATE_RUNNING)) << Log();
  pid_t worker = WorkerPidOf(stubborn);
  grpc::ClientContext context2;
  cancel.set_id(stubborn);
  ASSERT_TRUE(stub_->CancelJob(&context2, cancel, &job).ok());
  ASSERT_TRUE(WaitForState(stubborn, pb::JOB_STATE_CANCELLED)) << Log();
  EXPECT_NE(Get(stubborn).error().find("did not stop"), std::string::npos) << Get(stubborn).error();
  EXPECT_TRUE(WaitFor([&] { return kill(worker, 0) != 0; })) << "the worker that ignored cancel still runs";
  // The restarted worker takes new jobs.
  std::string next = Submit({});
  EXPECT_TRUE(WaitForState(next, pb::JOB_STATE_SUCCEEDED)) << Log();
}

TEST_F(ProcessTest, MissingModelFailsTheJobWithAClearError) {
  ASSERT_TRUE(StartQuarkd());
  std::string id = Submit({}, "models/does-not-exist");
  ASSERT_TRUE(WaitForState(id, pb::JOB_STATE_FAILED)) << Log();
  pb::Job job = Get(id);
  EXPECT_NE(job.error().find("does-not-exist"), std::string::npos) << job.error();
  EXPECT_EQ(job.attempts_size(), 1);  // a worker's own failure is final, not retried
}

TEST_F(ProcessTest, AJobWhoseWorkerCrashesEveryTimeFailsAfterMaxAttempts) {
  ASSERT_TRUE(StartQuarkd({"--max-attempts", "2"}));
  std::string id = Submit({{"test-mode", "crash"}});
  ASSERT_TRUE(WaitForState(id, pb::JOB_STATE_FAILED)) << Log();
  pb::Job job = Get(id);
  EXPECT_EQ(job.attempts_size(), 2);
  EXPECT_NE(job.error().find("attempt 1 on local-0-"), std::string::npos) << job.error();
  EXPECT_NE(job.error().find("attempt 2 on local-0-"), std::string::npos) << job.error();
  EXPECT_NE(Log().find("job=" + id), std::string::npos);
}

TEST_F(ProcessTest, JsonLogsAreOneObjectPerLineAndNameTheJob) {
  ASSERT_TRUE(StartQuarkd({"--log-format", "json"}));
  std::string id = Submit({{"test-mode", "fail"}});
  ASSERT_TRUE(WaitForState(id, pb::JOB_STATE_FAILED)) << Log();
  pb::SubmitJobRequest bad;  // refused, with quotes in its message
  bad.mutable_spec()->set_model_uri("file:///\"quoted\"/m");
  grpc::ClientContext context;
  pb::Job job;
  EXPECT_FALSE(stub_->SubmitJob(&context, bad, &job).ok());
  quarkd_->Stop();
  std::istringstream lines(Log());
  std::string line;
  int parsed = 0, about_job = 0;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] != '{') continue;  // gRPC's own stderr lines
    nlohmann::json entry = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(entry.is_discarded()) << line;
    EXPECT_TRUE(entry.contains("component") && entry.contains("msg") && entry.contains("level")) << line;
    ++parsed;
    if (entry["msg"].get<std::string>().find("job=" + id) != std::string::npos) ++about_job;
  }
  EXPECT_GT(parsed, 3);
  EXPECT_GE(about_job, 3);  // queued, leased, failed
}

}  // namespace
}  // namespace quark::server
