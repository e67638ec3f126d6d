// The worker against a real quarkd: local test-mode workers that quarkd spawns, and in-process agents running
// QuantizeJobRunner with a small writing pipeline that publishes into a real s3rver bucket.
#include <gtest/gtest.h>

#include <thread>

#include <grpcpp/grpcpp.h>

#include "quark/v1/service.grpc.pb.h"
#include "tests/storage/support/s3_test_base.h"
#include "tests/worker/support/quarkd.h"
#include "worker/quantize_job_runner.h"
#include "worker/storage/routing_object_store.h"
#include "worker/storage/s3_object_store.h"
#include "worker/worker_agent.h"

namespace quark::worker {
namespace {
namespace fs = std::filesystem;
using quark::v1::Job;
using quark::v1::JobState;

// Writes two files per job; fails with NOT_FOUND when the model has no config.json.
class TinyPipeline : public QuantizePipeline {
 public:
  absl::StatusOr<PipelineResult> Run(const PipelineRequest& request, ProgressSink& progress,
                                     const CancelToken& cancel) override {
    if (!fs::exists(request.model_dir / "config.json")) {
      return absl::NotFoundError("model_dir: config.json missing in " + request.model_dir.string());
    }
    for (int layer = 1; layer <= 2; ++layer) {
      if (cancel.IsCancelled()) return absl::CancelledError("cancelled");
      quark::testing::WriteFile(request.output_dir / ("part" + std::to_string(layer) + ".safetensors"),
                                std::string(1000 * layer, 'q'));
      quark::v1::Progress p;
      p.set_phase("quantize");
      p.set_layer(layer);
      p.set_num_layers(2);
      p.set_fraction(layer / 2.0);
      progress.Report(p);
    }
    PipelineResult result;
    result.metrics["ppl_after"] = 3.25;
    return result;
  }
};

class WorkerE2eTest : public quark::testing::S3TestBase {
 protected:
  std::unique_ptr<quark::v1::QuantizationService::Stub> Client(const quark::testing::Quarkd& quarkd) {
    return quark::v1::QuantizationService::NewStub(
        grpc::CreateChannel(quarkd.address(), grpc::InsecureChannelCredentials()));
  }
  Job Submit(quark::v1::QuantizationService::Stub& stub, const quark::v1::JobSpec& spec) {
    quark::v1::SubmitJobRequest request;
    *request.mutable_spec() = spec;
    Job job;
    grpc::ClientContext context;
    grpc::Status status = stub.SubmitJob(&context, request, &job);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return job;
  }
  // Follows WatchJob until the job reaches a final state; returns the final job.
  Job WaitForEnd(quark::v1::QuantizationService::Stub& stub, const std::string& id,
                 std::vector<quark::v1::JobEvent>* events = nullptr) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    quark::v1::WatchJobRequest request;
    request.set_id(id);
    auto reader = stub.WatchJob(&context, request);
    quark::v1::JobEvent event;
    while (reader->Read(&event)) {
      if (events) events->push_back(event);
      if (event.has_state() && event.state() >= quark::v1::JOB_STATE_SUCCEEDED) break;
    }
    context.TryCancel();
    reader->Finish();
    return Get(stub, id);
  }
  Job Get(quark::v1::QuantizationService::Stub& stub, const std::string& id) {
    quark::v1::GetJobRequest request;
    request.set_id(id);
    Job job;
    grpc::ClientContext context;
    stub.GetJob(&context, request, &job);
    return job;
  }
  quark::v1::JobSpec Spec(const std::string& model, const std::string& output) {
    quark::v1::JobSpec spec;
    spec.set_model_uri(model);
    spec.set_output_uri(output);
    spec.set_preset("int4_wo_128");
    spec.set_max_attempts(1);
    return spec;
  }
};

TEST_F(WorkerE2eTest, SpawnedNoopWorkerCompletesJobs) {
  quark::testing::QuarkdOptions options;
  options.workers = 1;
  absl::StatusOr<std::unique_ptr<quark::testing::Quarkd>> quarkd = quark::testing::Quarkd::Start(options);
  ASSERT_TRUE(quarkd.ok()) << quarkd.status();
  auto stub = Client(**quarkd);
  std::string root = "file://" + (*quarkd)->root().string();
  for (int i = 0; i < 3; ++i) {
    Job job = Submit(*stub, Spec(root + "/models/m", root + "/out"));
    Job done = WaitForEnd(*stub, job.id());
    EXPECT_EQ(done.state(), quark::v1::JOB_STATE_SUCCEEDED) << done.DebugString() << (*quarkd)->Log();
    EXPECT_EQ(done.worker_id().rfind("local-0-", 0), 0u) << done.worker_id();  // per-start suffix (#29)
  }
}

TEST_F(WorkerE2eTest, HeartbeatsKeepALongJobLeased) {
  quark::testing::QuarkdOptions options;
  options.workers = 1;
  options.test_mode = "sleep:2";
  options.extra_args = {"--lease-timeout-ms", "800"};
  absl::StatusOr<std::unique_ptr<quark::testing::Quarkd>> quarkd = quark::testing::Quarkd::Start(options);
  ASSERT_TRUE(quarkd.ok()) << quarkd.status();
  auto stub = Client(**quarkd);
  std::string root = "file://" + (*quarkd)->root().string();
  Job done = WaitForEnd(*stub, Submit(*stub, Spec(root + "/models/m", root + "/out")).id());
  EXPECT_EQ(done.state(), quark::v1::JOB_STATE_SUCCEEDED) << done.DebugString() << (*quarkd)->Log();
  EXPECT_EQ(done.attempts_size(), 1) << "the lease outlived its 800 ms timeout only through heartbeats";
}

TEST_F(WorkerE2eTest, CancelStopsASleepingWorker) {
  quark::testing::QuarkdOptions options;
  options.workers = 1;
  options.test_mode = "sleep:60";
  absl::StatusOr<std::unique_ptr<quark::testing::Quarkd>> quarkd = quark::testing::Quarkd::Start(options);
  ASSERT_TRUE(quarkd.ok()) << quarkd.status();
  auto stub = Client(**quarkd);
  std::string root = "file://" + (*quarkd)->root().string();
  Job job = Submit(*stub, Spec(root + "/models/m", root + "/out"));
  // Wait for the first progress event: the worker is running it.
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  quark::v1::WatchJobRequest watch;
  watch.set_id(job.id());
  auto reader = stub->WatchJob(&context, watch);
  quark::v1::JobEvent event;
  bool running = false;
  while (!running && reader->Read(&event)) running = event.has_progress();
  context.TryCancel();
  reader->Finish();
  ASSERT_TRUE(running) << (*quarkd)->Log();
  quark::v1::CancelJobRequest cancel;
  cancel.set_id(job.id());
  Job after_cancel;
  grpc::ClientContext cancel_context;
  ASSERT_TRUE(stub->CancelJob(&cancel_context, cancel, &after_cancel).ok());
  Job done = WaitForEnd(*stub, job.id());
  EXPECT_EQ(done.state(), quark::v1::JOB_STATE_CANCELLED) << done.DebugString();
}

TEST_F(WorkerE2eTest, AgentPublishesIntoS3rverBucket) {
  absl::StatusOr<std::unique_ptr<quark::testing::Quarkd>> quarkd = quark::testing::Quarkd::Start({});
  ASSERT_TRUE(quarkd.ok()) << quarkd.status();
  fs::path root = (*quarkd)->root();
  quark::testing::WriteFile(root / "models/tiny/config.json", "{}");
  auto store = storage::MakeObjectStore(storage::StorageOptions{{root}, server_->Config()});
  auto cache = std::make_shared<storage::ModelCache>(store, root / "cache", 1 << 20);
  auto runner = std::make_shared<QuantizeJobRunner>(QuantizeJobRunnerOptions{root / "work"}, store, cache,
                                                    std::make_shared<TinyPipeline>());
  WorkerAgentOptions options;
  options.server_address = (*quarkd)->address();
  options.worker_id = "e2e-agent";
  options.lease_wait = std::chrono::milliseconds(500);
  WorkerAgent agent(options, runner);
  std::thread agent_thread([&] { EXPECT_TRUE(agent.Run().ok()); });

  auto stub = Client(**quarkd);
  std::vector<quark::v1::JobEvent> events;
  Job job = Submit(*stub, Spec("file://" + (root / "models/tiny").string(), "s3://test/e2e"));
  Job done = WaitForEnd(*stub, job.id(), &events);
  Job missing = WaitForEnd(*stub, Submit(*stub, Spec("file://" + (root / "models/none").string(), "s3://test/e2e")).id());
  agent.Stop();
  agent_thread.join();

  ASSERT_EQ(done.state(), quark::v1::JOB_STATE_SUCCEEDED) << done.DebugString() << (*quarkd)->Log();
  EXPECT_EQ(done.worker_id(), "e2e-agent");
  EXPECT_EQ(done.result().manifest_uri(), "s3://test/e2e/" + job.id() + "/attempt-1/manifest.json");
  EXPECT_EQ(done.result().artifacts_size(), 2);
  EXPECT_EQ(done.result().metrics().at("ppl_after"), 3.25);
  storage::S3ObjectStore bucket(server_->Config());
  absl::StatusOr<std::string> manifest = bucket.GetBytes(done.result().manifest_uri());
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_NE(manifest->find("part2.safetensors"), std::string::npos);
  bool saw_layer_progress = false;
  for (const auto& e : events) saw_layer_progress |= e.has_progress() && e.progress().num_layers() == 2;
  EXPECT_TRUE(saw_layer_progress);

  EXPECT_EQ(missing.state(), quark::v1::JOB_STATE_FAILED);
  EXPECT_NE(missing.error().find("no such directory"), std::string::npos) << missing.error();
}

}  // namespace
}  // namespace quark::worker
