// quarkd --executor slurm against a real Slurm (slurmctld + slurmd + munged started by the test on loopback):
// a queued job makes quarkd sbatch a worker (the real agent, quark-test-worker), the job succeeds on it, the
// idle worker leaves; Slurm's pending reasons and sbatch's refusals reach the job's events; quarkd's shutdown
// scancels what it started. Skipped only when Slurm's daemons are not installed (scripts/install-deps.sh
// installs them).
#include <grpcpp/grpcpp.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>

#include "core/config/presets.h"
#include "quark/v1/service.grpc.pb.h"
#include "server/api/spec_validation.h"
#include "server/workers/command_runner.h"
#include "server/workers/slurm_cli.h"
#include "tests/estimate/synthetic_model.h"
#include "tests/server/quarkd_process.h"
#include "tests/server/slurm_fixture.h"
#include "tests/server/test_util.h"
#include "tests/support/require_peer.h"

namespace quark::server {
namespace {

namespace pb = quark::v1;
using testing::QuarkdProcess;
using testing::TestSlurm;
using testing::WaitFor;

class SlurmExecutorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!TestSlurm::Installed()) return;
    slurm_ = new TestSlurm();
    start_error_ = new std::string(slurm_->Start());
  }
  static void TearDownTestSuite() {
    delete slurm_;
    slurm_ = nullptr;
    delete start_error_;
    start_error_ = nullptr;
  }

  void SetUp() override {
    if (slurm_ == nullptr) QUARK_PEER_MISSING() << "Slurm (slurmctld, slurmd, munged, sbatch) is not installed";
    ASSERT_EQ(*start_error_, "") << "the test's Slurm cluster did not start";
    ASSERT_EQ(TestSlurm::Run({"squeue", "--noheader", "--format=%i"}), "") << "a previous test left Slurm jobs";
  }
  // quarkd's own shutdown scancels its workers; the next test starts from an empty queue.
  void TearDown() override {
    quarkd_.Stop();
    if (slurm_ != nullptr) WaitFor([] { return Squeue().empty(); }, std::chrono::seconds(15));
  }

  // quarkd with the Slurm executor and no local worker; workers run jobs in test mode (sleep `job_seconds`).
  void StartQuarkd(double job_seconds, std::vector<std::string> extra = {}) {
    std::filesystem::create_directories(dir_.File("models/m"));
    std::vector<std::string> args = {"--data-dir", dir_.File("data"), "--listen", "127.0.0.1:0",
                                     "--metrics-listen", "", "--allowed-roots",
                                     dir_.File("models") + "," + dir_.File("out"), "--executor", "slurm",
                                     "--slurm-worker-command", QUARK_AGENT_WORKER_BINARY,
                                     "--slurm-worker-arg=--test-mode",
                                     "--slurm-worker-arg=sleep:" + std::to_string(job_seconds),
                                     "--slurm-worker-arg=--data-dir=" + dir_.File("worker"),
                                     "--slurm-idle-exit-s", "2", "--slurm-poll-ms", "300", "--drain-grace-ms", "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    ASSERT_TRUE(quarkd_.Start(QUARKD_BINARY, args, dir_.File("ready.json"), dir_.File("quarkd.log")))
        << QuarkdLog();
    stub_ = pb::QuantizationService::NewStub(grpc::CreateChannel(quarkd_.address(), grpc::InsecureChannelCredentials()));
  }

  pb::Job Submit(const pb::WorkerResources& resources = {}, int64_t deadline_seconds = 0) {
    pb::SubmitJobRequest request;
    request.mutable_spec()->set_model_uri("file://" + dir_.File("models/m"));
    request.mutable_spec()->set_output_uri("file://" + dir_.File("out"));
    request.mutable_spec()->set_preset(AllPresets().front().name);
    *request.mutable_spec()->mutable_resources() = resources;
    request.mutable_spec()->set_deadline_seconds(deadline_seconds);
    grpc::ClientContext context;
    pb::Job job;
    grpc::Status status = stub_->SubmitJob(&context, request, &job);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return job;
  }

  pb::Job Get(const std::string& id) {
    grpc::ClientContext context;
    pb::GetJobRequest request;
    request.set_id(id);
    pb::Job job;
    stub_->GetJob(&context, request, &job);
    return job;
  }

  // The job's log events so far: WatchJob replays the stored log; the deadline ends the live part.
  std::vector<std::string> Logs(const std::string& id) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
    pb::WatchJobRequest request;
    request.set_id(id);
    std::unique_ptr<grpc::ClientReader<pb::JobEvent>> reader = stub_->WatchJob(&context, request);
    std::vector<std::string> logs;
    pb::JobEvent event;
    while (reader->Read(&event)) {
      if (event.has_log()) logs.push_back(event.log());
    }
    reader->Finish();
    return logs;
  }

  static std::string Find(const std::vector<std::string>& logs, const std::string& pattern) {
    for (const std::string& log : logs) {
      if (std::regex_search(log, std::regex(pattern))) return log;
    }
    return "";
  }

  std::string QuarkdLog() const {
    std::ifstream in(dir_.File("quarkd.log"));
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return text.size() > 4000 ? text.substr(text.size() - 4000) : text;
  }

  static std::string Squeue() { return TestSlurm::Run({"squeue", "--noheader", "--format=%i %T %r"}); }

  static TestSlurm* slurm_;
  static std::string* start_error_;
  testing::TempDir dir_;
  QuarkdProcess quarkd_;
  std::unique_ptr<pb::QuantizationService::Stub> stub_;
};

TestSlurm* SlurmExecutorTest::slurm_ = nullptr;
std::string* SlurmExecutorTest::start_error_ = nullptr;

TEST_F(SlurmExecutorTest, QueuedJobGetsAWorkerThroughSbatchThatLeavesOnceIdle) {
  ASSERT_NO_FATAL_FAILURE(StartQuarkd(1));
  pb::Job job = Submit({}, 600);
  std::string submitted;
  ASSERT_TRUE(WaitFor([&] { return !(submitted = Find(Logs(job.id()), "^slurm: submitted worker job")).empty(); },
                      std::chrono::seconds(30)))
      << QuarkdLog();
  std::smatch match;
  ASSERT_TRUE(std::regex_search(submitted, match, std::regex("worker job (\\d+): sbatch .*--cpus-per-task=1")))
      << submitted;
  std::string slurm_id = match[1];
  // The deadline's 600 s plus the 2 s idle exit, in whole minutes (less whatever passed before the poll).
  EXPECT_TRUE(std::regex_search(submitted, std::regex("--time=1[01]( |$)"))) << submitted;

  ASSERT_TRUE(WaitFor([&] { return Get(job.id()).state() == pb::JOB_STATE_SUCCEEDED; }, std::chrono::seconds(60)))
      << "state " << Get(job.id()).state() << "\n" << QuarkdLog() << "\nsqueue: " << Squeue() << "\n"
      << slurm_->Logs();
  EXPECT_EQ(Get(job.id()).worker_id(), "slurm-" + slurm_id);
  EXPECT_NE(Find(Logs(job.id()), "^slurm: worker job " + slurm_id + " RUNNING on "), "");
  // The worker leaves by itself (--exit-when-idle 2) and Slurm forgets the job.
  EXPECT_TRUE(WaitFor([&] { return Squeue().empty(); }, std::chrono::seconds(30))) << Squeue();
  std::ifstream worker_log(dir_.File("data/slurm/logs/quark-worker-" + slurm_id + ".log"));
  EXPECT_TRUE(worker_log.good()) << "the worker's Slurm output file is missing";
  EXPECT_EQ(QuarkdLog().find("scancelled"), std::string::npos) << "the worker was scancelled instead of leaving";
}

// A job whose peak memory quarkd estimated asks Slurm for that much (--mem, rounded up to MiB): a worker given less
// would announce less, pass the job over (worker_fit.h) and idle out, and the next one likewise.
TEST_F(SlurmExecutorTest, AWorkerIsAskedForTheMemoryTheJobIsEstimatedToNeed) {
  std::filesystem::create_directories(dir_.File("models/m"));
  estimate::testing::WriteBf16Llama(dir_.File("models/m"), 256, 768, 2);
  ASSERT_NO_FATAL_FAILURE(StartQuarkd(1));
  pb::Job job = Submit();
  ASSERT_GT(job.needs_host_memory_bytes(), 0) << "the synthetic model is estimated";
  const int64_t mb = (job.needs_host_memory_bytes() + (int64_t{1} << 20) - 1) >> 20;
  std::string submitted;
  ASSERT_TRUE(WaitFor([&] { return !(submitted = Find(Logs(job.id()), "^slurm: submitted worker job")).empty(); },
                      std::chrono::seconds(30)))
      << QuarkdLog();
  EXPECT_TRUE(std::regex_search(submitted, std::regex("--mem=" + std::to_string(mb) + "M( |$)"))) << submitted;
  // The worker (test mode: it measured nothing, so it announces no memory) takes it.
  ASSERT_TRUE(WaitFor([&] { return Get(job.id()).state() == pb::JOB_STATE_SUCCEEDED; }, std::chrono::seconds(60)))
      << "state " << Get(job.id()).state() << "\n" << QuarkdLog() << "\nsqueue: " << Squeue();
}

TEST_F(SlurmExecutorTest, PendingReasonReachesTheJobAndTheUnneededWorkerIsScancelled) {
  // Each worker takes every CPU of the node: the second one waits for Resources while the first runs both jobs.
  ASSERT_NO_FATAL_FAILURE(StartQuarkd(3, {"--slurm-max-workers", "2"}));
  pb::WorkerResources whole_node;
  whole_node.set_cpus(slurm_->cpus());
  pb::Job first = Submit(whole_node);
  pb::Job second = Submit(whole_node);
  std::string pending;
  ASSERT_TRUE(WaitFor([&] { return !(pending = Find(Logs(second.id()), "PENDING \\(Resources\\)")).empty(); },
                      std::chrono::seconds(30)))
      << QuarkdLog() << "\nsqueue: " << Squeue();
  EXPECT_TRUE(std::regex_search(pending, std::regex("^slurm: worker job \\d+ PENDING \\(Resources\\)$"))) << pending;

  ASSERT_TRUE(WaitFor([&] { return Get(second.id()).state() == pb::JOB_STATE_SUCCEEDED; }, std::chrono::seconds(60)))
      << QuarkdLog() << "\nsqueue: " << Squeue();
  EXPECT_EQ(Get(first.id()).state(), pb::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(Get(first.id()).worker_id(), Get(second.id()).worker_id()) << "one worker ran both jobs";
  EXPECT_TRUE(WaitFor([&] { return Squeue().empty(); }, std::chrono::seconds(30))) << Squeue();
  EXPECT_TRUE(std::regex_search(QuarkdLog(),
                                std::regex("slurm: worker job \\d+ scancelled: PENDING, no queued job needed it")))
      << QuarkdLog();
}

TEST_F(SlurmExecutorTest, SbatchRefusalOfAGpuJobIsAnEventAndTheJobStaysQueued) {
  // The node has no GPUs and the cluster no GresTypes: sbatch refuses --gres=gpu:1 outright.
  ASSERT_NO_FATAL_FAILURE(StartQuarkd(1));
  pb::WorkerResources gpu;
  gpu.set_gpus(1);
  pb::Job job = Submit(gpu);
  std::string refused;
  ASSERT_TRUE(WaitFor([&] { return !(refused = Find(Logs(job.id()), "^slurm: sbatch failed")).empty(); },
                      std::chrono::seconds(30)))
      << QuarkdLog();
  EXPECT_NE(refused.find("Invalid generic resource (gres) specification"), std::string::npos) << refused;
  // Retried with backoff, noted once while the error stays the same.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  std::vector<std::string> logs = Logs(job.id());
  EXPECT_EQ(std::count_if(logs.begin(), logs.end(), [](const std::string& log) { return log.rfind("slurm: sbatch", 0) == 0; }),
            1);
  std::string log = QuarkdLog();
  int tries = 0;
  for (size_t at = log.find("next try in"); at != std::string::npos; at = log.find("next try in", at + 1)) ++tries;
  EXPECT_GE(tries, 2) << "sbatch was not retried\n" << log;
  EXPECT_EQ(Get(job.id()).state(), pb::JOB_STATE_QUEUED);
  EXPECT_EQ(Squeue(), "");
}

TEST_F(SlurmExecutorTest, ADeduplicatedFollowerGetsNoWorkerOfItsOwn) {
  ASSERT_NO_FATAL_FAILURE(StartQuarkd(2));
  std::ofstream(dir_.File("models/m/config.json")) << "{}";  // a keyed model folder
  pb::Job leader = Submit();
  pb::Job follower = Submit();
  ASSERT_EQ(follower.deduplicated_from(), leader.id()) << "the same spec twice is not deduplicated";
  ASSERT_TRUE(WaitFor([&] { return Get(follower.id()).state() == pb::JOB_STATE_SUCCEEDED; }, std::chrono::seconds(60)))
      << QuarkdLog() << "\nsqueue: " << Squeue();
  EXPECT_NE(Find(Logs(leader.id()), "^slurm: submitted worker job"), "");
  EXPECT_EQ(Find(Logs(follower.id()), "^slurm: "), "");
  std::string log = QuarkdLog();
  EXPECT_EQ(log.find("slurm: submitted worker job"), log.rfind("slurm: submitted worker job")) << "two sbatch\n" << log;
}

TEST_F(SlurmExecutorTest, AWorkerThatCannotReachQuarkdIsScancelledAndReplaced) {
  // Port 1 on loopback refuses connections: the worker runs in Slurm but never registers.
  ASSERT_NO_FATAL_FAILURE(StartQuarkd(1, {"--slurm-server-address", "127.0.0.1:1"}));
  pb::Job job = Submit();
  std::string scancelled;
  ASSERT_TRUE(WaitFor([&] { return !(scancelled = Find(Logs(job.id()), "scancelled: running")).empty(); },
                      std::chrono::seconds(60)))
      << QuarkdLog() << "\nsqueue: " << Squeue();
  EXPECT_TRUE(std::regex_search(scancelled, std::regex("^slurm: worker job \\d+ scancelled: running .* without a job, "
                                                       "past its --exit-when-idle \\(does it reach quarkd at "
                                                       "127\\.0\\.0\\.1:1\\?")))
      << scancelled;
  // The job still waits, so it gets another worker.
  EXPECT_TRUE(WaitFor([&] {
    std::vector<std::string> logs = Logs(job.id());
    return std::count_if(logs.begin(), logs.end(), [](const std::string& log) {
             return log.rfind("slurm: submitted worker job", 0) == 0;
           }) >= 2;
  }, std::chrono::seconds(30))) << QuarkdLog();
  EXPECT_EQ(Get(job.id()).state(), pb::JOB_STATE_QUEUED);
}

TEST_F(SlurmExecutorTest, ShutdownScancelsPendingWorkers) {
  // --begin holds every worker PENDING (BeginTime) for an hour.
  ASSERT_NO_FATAL_FAILURE(StartQuarkd(1, {"--slurm-sbatch-arg=--begin=now+3600"}));
  pb::Job job = Submit();
  ASSERT_TRUE(WaitFor([&] { return !Find(Logs(job.id()), "^slurm: worker job \\d+ PENDING \\(BeginTime\\)$").empty(); },
                      std::chrono::seconds(30)))
      << QuarkdLog() << "\nsqueue: " << Squeue();
  ASSERT_NE(Squeue(), "");
  quarkd_.Stop();
  EXPECT_TRUE(WaitFor([&] { return Squeue().empty(); }, std::chrono::seconds(15))) << Squeue();
  EXPECT_NE(QuarkdLog().find("slurm executor stopped: scancelled 1 workers"), std::string::npos) << QuarkdLog();
}

// Without Slurm: what quarkd reads from the tools, and the commands' plumbing.
TEST(SlurmCliTest, ParsesSqueueAndSbatchOutput) {
  absl::StatusOr<std::vector<SlurmJobState>> jobs = ParseSqueue("12|PENDING|Resources|\n13|RUNNING|None|node[1-2]\n\n");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0].id, "12");
  EXPECT_EQ((*jobs)[0].reason, "Resources");
  EXPECT_EQ((*jobs)[0].nodes, "");
  EXPECT_EQ((*jobs)[1].state, "RUNNING");
  EXPECT_EQ((*jobs)[1].nodes, "node[1-2]");
  absl::Status bad = ParseSqueue("12|PENDING\n").status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("line 1"), std::string::npos) << bad;
  EXPECT_EQ(ParseSbatchId("42\n").value(), "42");
  EXPECT_EQ(ParseSbatchId("42;cluster\n").value(), "42");
  EXPECT_EQ(ParseSbatchId("Submitted batch job 42").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CommandRunnerTest, CapturesOutputStatusAndTimeout) {
  absl::StatusOr<CommandResult> result = RunCommand({"sh", "-c", "echo out; echo err >&2; exit 3"}, absl::Seconds(10));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->exit_code, 3);
  EXPECT_EQ(result->out, "out\n");
  EXPECT_EQ(result->err, "err\n");
  EXPECT_EQ(RunCommand({"sleep", "10"}, absl::Milliseconds(200)).status().code(), absl::StatusCode::kDeadlineExceeded);
  absl::Status missing = RunCommand({"quark-no-such-command"}, absl::Seconds(1)).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.message().find("quark-no-such-command"), std::string::npos) << missing;
  // The Slurm wrapper reports a failing tool with its exit status and stderr.
  SlurmCommands commands;
  commands.sbatch = "false";
  absl::Status refused = SlurmCli(commands).Submit({}, "/nonexistent").status();
  EXPECT_NE(refused.message().find("false exited with status 1"), std::string::npos) << refused;
}

TEST(SlurmResourcesTest, NegativeResourcesAreRefusedByName) {
  UriPolicy policy({"/tmp"});
  pb::SubmitJobRequest request;
  request.mutable_spec()->set_model_uri("file:///tmp/m");
  request.mutable_spec()->set_output_uri("file:///tmp/out");
  request.mutable_spec()->set_preset(AllPresets().front().name);
  EXPECT_TRUE(ValidateSubmitRequest(request, policy).ok()) << ValidateSubmitRequest(request, policy);
  request.mutable_spec()->mutable_resources()->set_gpus(-1);
  absl::Status status = ValidateSubmitRequest(request, policy);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("spec.resources"), std::string::npos) << status;
}

}  // namespace
}  // namespace quark::server
