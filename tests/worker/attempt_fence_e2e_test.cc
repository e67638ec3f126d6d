// Fencing tokens on output writes (issue #33, item 2): a job re-run after a lease loss publishes exactly once, and
// a stale attempt that publishes after the newer one neither overwrites the newer attempt's artifacts nor leaves its
// own visible. A real quarkd and two in-process worker agents with the real QuantizeJobRunner (fetch, publish,
// manifest) on the file store; the engine is a small pipeline that writes one weights file naming its agent.
//
// The stale attempt is made the way it happens: its agent holds the lease, quarkd is frozen (SIGSTOP) so the agent
// self-fences, quarkd thawed expires the lease and leases attempt 2 to the other agent, which publishes and
// succeeds. The stale agent's runner then publishes anyway, as a worker that never noticed (a pause in the upload
// past the lease): it is given a cancel token that never fires.
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/base/digest.h"
#include "quark/v1/service.grpc.pb.h"
#include "tests/worker/support/quarkd.h"
#include "tests/worker/support/run_job.h"
#include "worker/quantize_job_runner.h"
#include "worker/storage/model_cache.h"
#include "worker/storage/routing_object_store.h"
#include "worker/worker_agent.h"

namespace quark::worker {
namespace {
namespace fs = std::filesystem;

using quark::testing::GetJob;
using quark::testing::WaitUntil;
using quark::v1::Job;

std::string Read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// The engine's place: one weights file that says which agent made it, and the model's config.json.
class LabelPipeline : public QuantizePipeline {
 public:
  explicit LabelPipeline(std::string label) : label_(std::move(label)) {}
  absl::StatusOr<PipelineResult> Run(const PipelineRequest& request, ProgressSink& /*progress*/,
                                     const CancelToken& /*cancel*/) override {
    fs::copy_file(request.model_dir / "config.json", request.output_dir / "config.json");
    std::ofstream(request.output_dir / "model.safetensors", std::ios::binary) << "weights of the " << label_ << " run";
    return PipelineResult();
  }

 private:
  std::string label_;
};

// The stale agent's runner: its first run waits, after the lease is gone, until the test lets it go on, then runs
// the real runner to the end with a token that never fires, and says what it published.
class StaleRunner : public JobRunner {
 public:
  explicit StaleRunner(std::shared_ptr<QuantizeJobRunner> inner) : inner_(std::move(inner)) {}

  absl::StatusOr<quark::v1::JobResult> Run(const Job& job, const LeaseContext& lease, ProgressSink& progress,
                                           const CancelToken& cancel) override {
    running_.store(true);
    while (!cancel.IsCancelled() || !go_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    reason_.store(cancel.reason());
    CancelToken never;
    absl::StatusOr<quark::v1::JobResult> result = inner_->Run(job, lease, progress, never);
    if (result.ok()) published_manifest_ = Read(fs::path(result->manifest_uri().substr(7)));
    ran_.store(true);
    return result;
  }
  absl::Status Discard(const Job& job, const LeaseContext& lease, const quark::v1::JobResult& result) override {
    absl::Status discarded = inner_->Discard(job, lease, result);
    discarded_.fetch_add(1);  // counted once the removal has returned, so the test reads its whole effect
    return discarded;
  }

  std::atomic<bool> running_{false};
  std::atomic<bool> go_{false};
  std::atomic<bool> ran_{false};
  std::atomic<int> discarded_{0};  // Discard calls that have returned
  std::atomic<CancelToken::Reason> reason_{CancelToken::Reason::kNone};
  std::string published_manifest_;  // read once ran_ is true

 private:
  std::shared_ptr<QuantizeJobRunner> inner_;
};

class AttemptFenceE2eTest : public ::testing::Test {
 protected:
  std::shared_ptr<QuantizeJobRunner> Runner(const std::string& label) {
    auto store = storage::MakeObjectStore(storage::StorageOptions{{quarkd_->root()}, std::nullopt});
    auto cache = std::make_shared<storage::ModelCache>(store, quarkd_->root() / ("cache-" + label), 1 << 20);
    return std::make_shared<QuantizeJobRunner>(QuantizeJobRunnerOptions{quarkd_->root() / ("work-" + label)}, store,
                                               cache, std::make_shared<LabelPipeline>(label));
  }

  std::unique_ptr<WorkerAgent> Agent(const std::string& id, std::shared_ptr<JobRunner> runner) {
    WorkerAgentOptions options;
    options.server_address = quarkd_->address();
    options.worker_id = id;
    options.lease_wait = std::chrono::milliseconds(300);
    options.rpc_timeout = std::chrono::milliseconds(5000);
    return std::make_unique<WorkerAgent>(options, std::move(runner));
  }

  std::unique_ptr<quark::testing::Quarkd> quarkd_;
};

TEST_F(AttemptFenceE2eTest, AStaleAttemptPublishingAfterTheNewerOneChangesNothingAndLeavesNothing) {
  quark::testing::QuarkdOptions options;
  options.workers = 0;
  options.extra_args = {"--lease-timeout-ms", "1500"};  // the helper sets a 200 ms heartbeat
  absl::StatusOr<std::unique_ptr<quark::testing::Quarkd>> started = quark::testing::Quarkd::Start(options);
  ASSERT_TRUE(started.ok()) << started.status();
  quarkd_ = *std::move(started);
  const fs::path root = quarkd_->root();
  fs::create_directories(root / "models/m");
  std::ofstream(root / "models/m/config.json") << R"({"model_type":"llama"})";

  auto stale = std::make_shared<StaleRunner>(Runner("stale"));
  std::unique_ptr<WorkerAgent> stale_agent = Agent("stale-agent", stale);
  std::thread stale_thread([&] { EXPECT_TRUE(stale_agent->Run().ok()); });

  auto stub = quark::v1::QuantizationService::NewStub(
      grpc::CreateChannel(quarkd_->address(), grpc::InsecureChannelCredentials()));
  quark::v1::SubmitJobRequest submit;
  submit.mutable_spec()->set_model_uri("file://" + (root / "models/m").string());
  submit.mutable_spec()->set_output_uri("file://" + (root / "out").string());
  submit.mutable_spec()->set_preset("int4_wo_128");
  submit.mutable_spec()->set_max_attempts(3);
  const Job job = quark::testing::SubmitJob(*stub, submit);
  ASSERT_FALSE(job.id().empty());
  ASSERT_TRUE(WaitUntil([&] { return stale->running_.load(); }, std::chrono::seconds(60))) << quarkd_->Log();

  // Attempt 1 loses its lease: quarkd frozen past the lease timeout, then thawed (it expires the lease).
  const pid_t pid = quarkd_->process().pid();
  ASSERT_EQ(kill(pid, SIGSTOP), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  ASSERT_EQ(kill(pid, SIGCONT), 0);

  // Attempt 2 on the other agent publishes and succeeds.
  std::unique_ptr<WorkerAgent> newer_agent = Agent("newer-agent", Runner("newer"));
  std::thread newer_thread([&] { EXPECT_TRUE(newer_agent->Run().ok()); });
  Job done;
  ASSERT_TRUE(WaitUntil([&] { return (done = GetJob(*stub, job.id())).state() == quark::v1::JOB_STATE_SUCCEEDED; },
                        std::chrono::seconds(60)))
      << done.DebugString() << quarkd_->Log();
  ASSERT_EQ(done.attempts_size(), 2) << done.DebugString();
  const fs::path newer_folder = quark::testing::AttemptFolder(root / "out", done);
  const fs::path stale_folder = root / "out" / job.id() / "attempt-1";
  EXPECT_EQ(done.result().manifest_uri(), "file://" + (newer_folder / "manifest.json").string());
  const std::string newer_manifest = Read(newer_folder / "manifest.json");
  ASSERT_FALSE(newer_manifest.empty());

  // Attempt 1 wakes up and publishes after attempt 2: into its own folder, then its agent removes it.
  stale->go_.store(true);
  ASSERT_TRUE(WaitUntil([&] { return stale->ran_.load() && stale->discarded_.load() > 0; }, std::chrono::seconds(60)))
      << quarkd_->Log();
  EXPECT_EQ(stale->reason_.load(), CancelToken::Reason::kLeaseLost) << "the stale agent had self-fenced";
  EXPECT_NE(stale->published_manifest_.find("\"attempt\": 1"), std::string::npos)
      << "the stale attempt really published: " << stale->published_manifest_;
  EXPECT_FALSE(fs::exists(stale_folder / "manifest.json")) << "a stale attempt's manifest is left visible";
  EXPECT_FALSE(fs::exists(stale_folder / "model.safetensors")) << "a stale attempt's artifact is left visible";

  // The newer attempt's artifacts are what its result says, byte for byte; the job stays as it was.
  EXPECT_EQ(Read(newer_folder / "manifest.json"), newer_manifest);
  EXPECT_EQ(Read(newer_folder / "model.safetensors"), "weights of the newer run");
  for (const quark::v1::Artifact& artifact : done.result().artifacts()) {
    absl::StatusOr<std::string> sha = Sha256FileHex(artifact.uri().substr(7));
    ASSERT_TRUE(sha.ok()) << sha.status();
    EXPECT_EQ(*sha, artifact.sha256()) << artifact.uri();
  }
  const Job after = GetJob(*stub, job.id());
  EXPECT_EQ(after.state(), quark::v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(after.attempts_size(), 2);
  EXPECT_EQ(after.result().SerializeAsString(), done.result().SerializeAsString());
  EXPECT_EQ(fs::exists(root / "out" / job.id() / "manifest.json"), false) << "nothing published outside an attempt";

  stale_agent->Stop();
  newer_agent->Stop();
  stale_thread.join();
  newer_thread.join();
}

}  // namespace
}  // namespace quark::worker
