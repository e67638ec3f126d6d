// Resume on ANY worker (#34 item 1), through the whole house: a real quarkd, real quark-workers with data folders
// of their own, a real s3rver behind the fault proxy. The first worker is killed with SIGKILL while it uploads layer
// 2's checkpoint (the proxy holds that PUT; layer 0's commit marker met two 500s on the way and was retried); a
// second worker with a fresh data folder downloads layers 0..1, resumes at layer 2 and publishes an artifact
// byte-identical to an uninterrupted job's; the checkpoint prefix is gone afterwards. With an expiry of 0 s the
// second worker deletes the dead worker's checkpoint instead and starts at layer 0 (same artifact).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <future>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "quark/v1/service.grpc.pb.h"
#include "tests/storage/support/s3rver.h"
#include "tests/support/require_peer.h"
#include "tests/worker/support/quarkd.h"
#include "tests/worker/support/run_job.h"
#include "worker/storage/s3_object_store.h"

namespace quark::worker {
namespace {

namespace fs = std::filesystem;
using quark::testing::Subprocess;

std::string Fixtures() {
  const char* shared = std::getenv("QUARK_SHARED_DIR");
  return std::string(shared != nullptr ? shared : QUARK_TEST_SOURCE_DIR "/../shared") + "/fixtures";
}

bool Logged(const std::vector<quark::v1::JobEvent>& events, const std::string& text) {
  return std::any_of(events.begin(), events.end(),
                     [&](const quark::v1::JobEvent& e) { return e.log().find(text) != std::string::npos; });
}

std::string Logs(const std::vector<quark::v1::JobEvent>& events) {
  std::string all;
  for (const auto& e : events) {
    if (!e.log().empty()) all += e.log() + "\n";
  }
  return all;
}

class RemoteResumeE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<quark::testing::S3rver>> s3 = quark::testing::S3rver::Start("test");
    if (!s3.ok() && s3.status().code() == absl::StatusCode::kFailedPrecondition) {
      QUARK_PEER_MISSING() << s3.status();
    }
    ASSERT_TRUE(s3.ok()) << s3.status();
    s3_ = *std::move(s3);
    quark::testing::QuarkdOptions options;
    options.workers = 0;  // the test runs its own, each with its own data folder
    options.extra_roots = {Fixtures()};
    options.extra_args = {"--lease-timeout-ms", "2000"};
    absl::StatusOr<std::unique_ptr<quark::testing::Quarkd>> quarkd = quark::testing::Quarkd::Start(options);
    ASSERT_TRUE(quarkd.ok()) << quarkd.status();
    quarkd_ = *std::move(quarkd);
    stub_ = quark::v1::QuantizationService::NewStub(
        grpc::CreateChannel(quarkd_->address(), grpc::InsecureChannelCredentials()));
  }

  // A fault proxy in front of s3rver whose first PUT of a layer-2 checkpoint object is never answered, after
  // `rules` (JSON objects, comma-separated).
  void StartProxy(const std::string& rules) {
    absl::StatusOr<std::unique_ptr<quark::testing::FaultProxy>> proxy = quark::testing::FaultProxy::Start(
        s3_->endpoint(),
        "[" + rules + R"({"method":"PUT","path":"quark-checkpoints/[^/]+/layer-00002","hang":true,"times":1}])");
    ASSERT_TRUE(proxy.ok()) << proxy.status();
    proxy_ = *std::move(proxy);
  }

  // A quark-worker with the data folder <root>/<name>, reaching S3 through the proxy (or directly).
  std::unique_ptr<Subprocess> StartWorker(const std::string& name, std::vector<std::string> extra_args = {},
                                          bool through_proxy = true) {
    std::vector<std::string> argv = {quark::testing::BuiltBinary("worker/quark-worker"),
                                     "--server",
                                     quarkd_->address(),
                                     "--worker-id",
                                     name,
                                     "--data-dir",
                                     (quarkd_->root() / name).string(),
                                     "--allowed-roots",
                                     quarkd_->root().string() + "," + Fixtures(),
                                     "--skip-throughput-probe",
                                     "--lease-wait-ms",
                                     "500"};
    argv.insert(argv.end(), extra_args.begin(), extra_args.end());
    std::vector<std::string> env = s3_->Env();
    if (through_proxy) env[0] = "AWS_ENDPOINT_URL=" + proxy_->endpoint();
    env.insert(env.end(), {"QUARK_THREADS=1", "OMP_NUM_THREADS=1"});
    absl::StatusOr<std::unique_ptr<Subprocess>> worker =
        Subprocess::Start(argv, env, quarkd_->root() / (name + ".log"));
    EXPECT_TRUE(worker.ok()) << worker.status();
    return worker.ok() ? *std::move(worker) : nullptr;
  }

  static quark::v1::SubmitJobRequest Request() {
    quark::v1::SubmitJobRequest request;
    quark::v1::JobSpec* spec = request.mutable_spec();
    spec->set_model_uri("file://" + Fixtures() + "/tinyllama-a");
    spec->set_preset("uint4_wo_128");
    spec->add_algo_config()->mutable_gptq()->set_damp_percent(0.01f);
    spec->set_output_uri("s3://test/out");
    spec->set_max_attempts(3);
    spec->set_force(true);  // the same job thrice: run it each time
    spec->mutable_calibration()->set_uri("file://" + Fixtures() + "/eval/tinystories_train_split.txt");
    spec->mutable_calibration()->set_num_samples(8);
    spec->mutable_calibration()->set_seq_len(128);
    return request;
  }

  // The published files but the manifest, relative path -> bytes, read straight from s3rver: the folder of the
  // attempt that published (the manifest's, under <output>/<job id>/attempt-<N>/).
  std::map<std::string, std::string> Artifact(const quark::v1::Job& job) {
    storage::S3ObjectStore store(s3_->Config());
    const std::string& manifest = job.result().manifest_uri();
    EXPECT_NE(manifest.find("s3://test/out/" + job.id() + "/attempt-"), std::string::npos) << manifest;
    const std::string prefix = manifest.substr(0, manifest.rfind('/') + 1);
    std::map<std::string, std::string> files;
    absl::StatusOr<std::vector<storage::ObjectInfo>> listed = store.List(prefix);
    EXPECT_TRUE(listed.ok()) << listed.status();
    for (const storage::ObjectInfo& info : listed.ok() ? *listed : std::vector<storage::ObjectInfo>{}) {
      if (info.uri == prefix + "manifest.json") continue;
      files[info.uri.substr(prefix.size())] = *store.GetBytes(info.uri);
    }
    return files;
  }

  size_t CheckpointObjects(const std::string& job_id) {
    storage::S3ObjectStore store(s3_->Config());
    absl::StatusOr<std::vector<storage::ObjectInfo>> listed = store.List("s3://test/out/.quark-checkpoints/" + job_id);
    EXPECT_TRUE(listed.ok()) << listed.status();
    return listed.ok() ? listed->size() : 0;
  }

  // Submits the job, lets `first` run it until it hangs in the upload of layer 2's checkpoint, kills it with
  // SIGKILL there and lets `second` take the retry; returns the job at its end.
  quark::v1::Job KillDuringUploadThenResume(Subprocess& first, const std::string& second_name,
                                            std::vector<std::string> second_args,
                                            std::vector<quark::v1::JobEvent>& events,
                                            std::unique_ptr<Subprocess>& second) {
    const int hang = 1;
    auto done = std::async(std::launch::async, [&] {
      return quark::testing::RunJobToEnd(*stub_, Request(), events, std::chrono::seconds(400));
    });
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(300);
    while (proxy_->CountLines("hang PUT") < hang && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(proxy_->CountLines("hang PUT"), hang) << proxy_->Log() << first.Log();
    EXPECT_EQ(first.Stop(SIGKILL), 128 + SIGKILL);
    second = StartWorker(second_name, std::move(second_args));
    return done.get();
  }

  std::unique_ptr<quark::testing::S3rver> s3_;
  std::unique_ptr<quark::testing::FaultProxy> proxy_;
  std::unique_ptr<quark::testing::Quarkd> quarkd_;
  std::unique_ptr<quark::v1::QuantizationService::Stub> stub_;
};

TEST_F(RemoteResumeE2eTest, KilledDuringACheckpointUploadResumesOnAnotherWorker) {
  // The uninterrupted job, on a worker that keeps its checkpoints to itself and talks to s3rver directly.
  std::vector<quark::v1::JobEvent> events;
  std::unique_ptr<Subprocess> reference = StartWorker("worker-ref", {"--remote-checkpoints=false"}, false);
  ASSERT_NE(reference, nullptr);
  const quark::v1::Job first = quark::testing::RunJobToEnd(*stub_, Request(), events, std::chrono::seconds(400));
  ASSERT_EQ(first.state(), quark::v1::JOB_STATE_SUCCEEDED) << first.DebugString() << reference->Log();
  reference->Stop(SIGTERM);
  const auto expected = Artifact(first);
  ASSERT_FALSE(expected.empty());

  // Killed while it uploads layer 2's checkpoint; another worker with an empty data folder finishes. Layer 0's
  // marker fails twice on the way (the client retries it).
  StartProxy(R"({"method":"PUT","path":"quark-checkpoints/[^/]+/commit-00000","status":500,"times":2},)");
  events.clear();
  std::unique_ptr<Subprocess> a = StartWorker("worker-a");
  ASSERT_NE(a, nullptr);
  std::unique_ptr<Subprocess> b;
  const quark::v1::Job done = KillDuringUploadThenResume(*a, "worker-b", {}, events, b);
  ASSERT_EQ(done.state(), quark::v1::JOB_STATE_SUCCEEDED) << done.DebugString() << Logs(events) << quarkd_->Log();
  EXPECT_EQ(done.attempts_size(), 2) << done.DebugString();
  EXPECT_EQ(proxy_->CountLines("fault PUT"), 2) << "layer 0's marker: two 500s, then retried\n" << proxy_->Log();
  EXPECT_TRUE(Logged(events, "checkpoint: restored layers 0..1 from s3://test/out/.quark-checkpoints/" + done.id()))
      << Logs(events);
  EXPECT_TRUE(Logged(events, "resumed at layer 2 of 4")) << Logs(events);
  EXPECT_EQ(done.result().metrics().at("resumed_at_layer"), 2.0);
  const auto artifact = Artifact(done);
  ASSERT_EQ(artifact.size(), expected.size());
  for (const auto& [file, bytes] : expected) {
    ASSERT_TRUE(artifact.count(file)) << file;
    EXPECT_TRUE(artifact.at(file) == bytes) << file << " differs from the uninterrupted job's";
  }
  EXPECT_EQ(CheckpointObjects(done.id()), 0u) << "the checkpoint prefix is deleted after success";
  EXPECT_FALSE(fs::exists(quarkd_->root() / "worker-b" / "checkpoints" / done.id()));
  b->Stop(SIGTERM);

  // The same, but the next worker's expiry is 0 s: the dead worker's checkpoint is deleted, not resumed.
  StartProxy("");
  events.clear();
  std::unique_ptr<Subprocess> c = StartWorker("worker-c");
  ASSERT_NE(c, nullptr);
  std::unique_ptr<Subprocess> d;
  const quark::v1::Job expired = KillDuringUploadThenResume(*c, "worker-d", {"--checkpoint-expiry-s", "0"}, events, d);
  ASSERT_EQ(expired.state(), quark::v1::JOB_STATE_SUCCEEDED) << expired.DebugString() << Logs(events);
  EXPECT_TRUE(Logged(events, "expired")) << Logs(events);
  EXPECT_FALSE(Logged(events, "resumed at layer")) << Logs(events);
  EXPECT_EQ(expired.result().metrics().count("resumed_at_layer"), 0u);
  EXPECT_TRUE(Artifact(expired) == expected) << "the artifact of a run from layer 0 differs";
  EXPECT_EQ(CheckpointObjects(expired.id()), 0u);
}

}  // namespace
}  // namespace quark::worker
