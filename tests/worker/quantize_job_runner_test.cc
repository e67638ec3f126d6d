// QuantizeJobRunner around a small pipeline that writes a fake artifact: fetch, progress, cancel and publish.
#include "worker/quantize_job_runner.h"

#include <gtest/gtest.h>

#include <sstream>

#include "core/base/digest.h"
#include "tests/storage/support/s3_test_base.h"
#include "tests/worker/recording_sink.h"
#include "worker/lease_storage.h"
#include "worker/storage/routing_object_store.h"
#include "worker/storage/s3_object_store.h"

namespace quark::worker {
namespace {
namespace fs = std::filesystem;

// Writes config.json + one weights file per "layer", reporting each layer; stops on cancel.
class WritingPipeline : public QuantizePipeline {
 public:
  absl::StatusOr<PipelineResult> Run(const PipelineRequest& request, ProgressSink& progress,
                                     const CancelToken& cancel) override {
    seen = request;
    if (on_start) on_start();
    if (!request.calibration_file.empty()) calibration_text = quark::testing::ReadFile(request.calibration_file);
    if (!fs::exists(request.model_dir / "config.json")) return absl::NotFoundError("config.json missing");
    quark::testing::WriteFile(request.output_dir / "config.json", quark::testing::ReadFile(request.model_dir / "config.json"));
    for (int layer = 1; layer <= layers; ++layer) {
      if (cancel.IsCancelled()) return absl::CancelledError("cancelled at layer " + std::to_string(layer));
      quark::testing::WriteFile(request.output_dir / ("layer" + std::to_string(layer) + ".safetensors"),
                                std::string(100 * layer, 'w'));
      quark::v1::Progress p;
      p.set_phase("quantize");
      p.set_layer(layer);
      p.set_num_layers(layers);
      p.set_fraction(static_cast<double>(layer) / layers);
      progress.Report(p);
      if (on_layer) on_layer(layer);
    }
    PipelineResult result;
    result.metrics = {{"ppl_after", 7.5}};
    return result;
  }

  int layers = 3;
  std::function<void(int)> on_layer;
  std::function<void()> on_start;  // after the fetch, before the model is read
  PipelineRequest seen;
  std::string calibration_text;  // read during Run: the scratch folder is gone afterwards
};

class QuantizeJobRunnerTest : public quark::testing::S3TestBase {
 protected:
  void SetUp() override {
    S3TestBase::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    store_ = storage::MakeObjectStore(storage::StorageOptions{{root_}, server_->Config()});
    cache_ = std::make_shared<storage::ModelCache>(store_, dir_.path() / "cache", 1 << 20);
    quark::testing::WriteFile(root_ / "models/tiny/config.json", R"({"model_type":"llama"})");
    quark::testing::WriteFile(root_ / "calib.txt", "some calibration text");
  }
  QuantizeJobRunner Runner() {
    return QuantizeJobRunner({dir_.path() / "work"}, store_, cache_, pipeline_);
  }
  quark::v1::Job Job(const std::string& model_uri, const std::string& output_uri) {
    quark::v1::Job job;
    job.set_id("job-7");
    job.mutable_spec()->set_model_uri(model_uri);
    job.mutable_spec()->set_output_uri(output_uri);
    job.mutable_spec()->set_preset("int4_wo_128");
    job.add_attempts();  // its first attempt, as quarkd leases it: published under attempt-1 (#33 item 2)
    return job;
  }
  std::string FileUri(const fs::path& p) { return "file://" + p.string(); }

  quark::testing::TempDir dir_;
  fs::path root_ = dir_.path() / "root";
  std::shared_ptr<storage::ObjectStore> store_;
  std::shared_ptr<storage::ModelCache> cache_;
  std::shared_ptr<WritingPipeline> pipeline_ = std::make_shared<WritingPipeline>();
};

TEST_F(QuantizeJobRunnerTest, FileModelToFileOutput) {
  quark::v1::Job job = Job(FileUri(root_ / "models/tiny"), FileUri(root_ / "out"));
  job.mutable_spec()->mutable_calibration()->set_uri(FileUri(root_ / "calib.txt"));
  RecordingSink sink;
  CancelToken cancel;
  absl::StatusOr<quark::v1::JobResult> result = Runner().Run(job, sink, cancel);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->manifest_uri(), FileUri(root_ / "out/job-7/attempt-1/manifest.json"));
  ASSERT_EQ(result->artifacts_size(), 4);
  EXPECT_EQ(result->artifacts(0).uri(), FileUri(root_ / "out/job-7/attempt-1/config.json"));
  EXPECT_EQ(result->metrics().at("ppl_after"), 7.5);
  EXPECT_GT(result->metrics().count("seconds_total"), 0u);
  EXPECT_EQ(pipeline_->calibration_text, "some calibration text");
  // A file:// model is read through its pinned view in the job's scratch folder (removed with the job).
  EXPECT_EQ(pipeline_->seen.model_dir, dir_.path() / "work/jobs/job-7/scratch/model");
  EXPECT_EQ(quark::testing::ReadFile(root_ / "out/job-7/attempt-1/config.json"), R"({"model_type":"llama"})");

  EXPECT_EQ(sink.Phases(), (std::vector<std::string>{"fetch", "quantize", "upload"}));
  double last = 0;
  for (const auto& e : sink.events()) {
    EXPECT_GE(e.fraction(), last) << e.DebugString();
    last = e.fraction();
  }
  EXPECT_EQ(last, 1.0);
  nlohmann::json manifest =
      nlohmann::json::parse(quark::testing::ReadFile(root_ / "out/job-7/attempt-1/manifest.json"));
  EXPECT_EQ(manifest["files"].size(), 4u);
  EXPECT_EQ(manifest["config"]["preset"], "int4_wo_128");
  EXPECT_EQ(manifest["model_uri"], FileUri(root_ / "models/tiny"));
  EXPECT_EQ(manifest["spec"]["preset"], "int4_wo_128");
  // Every input by URI, size and SHA-256 (#34 item 3), and the engine's build.
  const nlohmann::json& inputs = manifest["inputs"];
  EXPECT_EQ(inputs["model"]["uri"], FileUri(root_ / "models/tiny"));
  ASSERT_FALSE(inputs["model"]["files"].empty()) << inputs.dump();
  for (const nlohmann::json& file : inputs["model"]["files"]) {
    const fs::path source = root_ / "models/tiny" / file["path"].get<std::string>();
    EXPECT_EQ(file["size_bytes"], fs::file_size(source)) << file.dump();
    EXPECT_EQ(file["sha256"], Sha256Hex(quark::testing::ReadFile(source))) << file.dump();
  }
  EXPECT_EQ(inputs["calibration"]["uri"], FileUri(root_ / "calib.txt"));
  EXPECT_EQ(inputs["calibration"]["sha256"], Sha256Hex("some calibration text"));
  EXPECT_FALSE(inputs.contains("evaluation")) << "the job has no evaluation text";
  EXPECT_EQ(manifest["build"]["engine_version"], manifest["engine_version"]);
  EXPECT_FALSE(manifest["build"]["compiler"].get<std::string>().empty());
  EXPECT_FALSE(fs::exists(dir_.path() / "work/jobs/job-7")) << "the job's temp folder is removed";
}

// Issue #29 item 2: the tenant replaces its model folder by a symlink to another tenant's model after the fetch and
// before the engine reads it. The engine reads the files the fetch checked and pinned.
TEST_F(QuantizeJobRunnerTest, AModelFolderSwappedAfterTheFetchIsNotWhatTheEngineReads) {
  quark::testing::WriteFile(dir_.path() / "victim/tiny/config.json", R"({"model_type":"secret"})");
  pipeline_->on_start = [&] {
    fs::rename(root_ / "models/tiny", root_ / "models/tiny.old");
    fs::create_directory_symlink(dir_.path() / "victim/tiny", root_ / "models/tiny");
  };
  RecordingSink sink;
  CancelToken cancel;
  absl::StatusOr<quark::v1::JobResult> result =
      Runner().Run(Job(FileUri(root_ / "models/tiny"), FileUri(root_ / "out")), sink, cancel);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(quark::testing::ReadFile(root_ / "out/job-7/attempt-1/config.json"), R"({"model_type":"llama"})");
}

TEST_F(QuantizeJobRunnerTest, S3ModelToS3Output) {
  ASSERT_TRUE(store_->PutBytes("s3://test/models/tiny/config.json", R"({"model_type":"llama"})").ok());
  ASSERT_TRUE(store_->PutBytes("s3://test/models/tiny/model.safetensors", std::string(300, 'm')).ok());
  RecordingSink sink;
  CancelToken cancel;
  absl::StatusOr<quark::v1::JobResult> result =
      Runner().Run(Job("s3://test/models/tiny", "s3://test/artifacts"), sink, cancel);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->manifest_uri(), "s3://test/artifacts/job-7/attempt-1/manifest.json");
  absl::StatusOr<std::string> manifest = store_->GetBytes(result->manifest_uri());
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(nlohmann::json::parse(*manifest)["files"].size(), 4u);
  EXPECT_TRUE(fs::exists(pipeline_->seen.model_dir / "model.safetensors")) << "downloaded into the cache";
}

TEST_F(QuantizeJobRunnerTest, MissingModelIsAClearError) {
  RecordingSink sink;
  CancelToken cancel;
  std::string uri = FileUri(root_ / "models/none");
  absl::StatusOr<quark::v1::JobResult> result = Runner().Run(Job(uri, FileUri(root_ / "out")), sink, cancel);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(result.status().message(), "model_uri: " + uri + ": no such directory");
}

TEST_F(QuantizeJobRunnerTest, ConfinedUrisAndEmptyFields) {
  RecordingSink sink;
  CancelToken cancel;
  EXPECT_EQ(Runner().Run(Job("file:///etc", FileUri(root_ / "out")), sink, cancel).status().code(),
            absl::StatusCode::kPermissionDenied);
  absl::StatusOr<quark::v1::JobResult> escape =
      Runner().Run(Job(FileUri(root_ / "models/tiny"), FileUri(root_) + "/../escape"), sink, cancel);
  EXPECT_EQ(escape.status().code(), absl::StatusCode::kPermissionDenied) << escape.status();
  EXPECT_FALSE(fs::exists(dir_.path() / "escape"));
  EXPECT_EQ(Runner().Run(Job("", "file:///x"), sink, cancel).status().message(), "spec.model_uri: empty");
  EXPECT_EQ(Runner().Run(Job("file:///x", ""), sink, cancel).status().message(), "spec.output_uri: empty");
  quark::v1::Job bad_calib = Job(FileUri(root_ / "models/tiny"), FileUri(root_ / "out"));
  bad_calib.mutable_spec()->mutable_calibration()->set_uri(FileUri(root_ / "missing.txt"));
  absl::StatusOr<quark::v1::JobResult> calib = Runner().Run(bad_calib, sink, cancel);
  EXPECT_EQ(calib.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(calib.status().message().find("spec.calibration.uri"), std::string::npos) << calib.status();
}

TEST_F(QuantizeJobRunnerTest, CancelBetweenLayersPublishesNothing) {
  CancelToken cancel;
  pipeline_->on_layer = [&](int layer) {
    if (layer == 1) cancel.Cancel(CancelToken::Reason::kCancelled);
  };
  RecordingSink sink;
  absl::StatusOr<quark::v1::JobResult> result =
      Runner().Run(Job(FileUri(root_ / "models/tiny"), FileUri(root_ / "out")), sink, cancel);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kCancelled);
  EXPECT_FALSE(fs::exists(root_ / "out/job-7"));
}

TEST_F(QuantizeJobRunnerTest, FailedUploadMeansNoManifest) {
  absl::StatusOr<std::unique_ptr<quark::testing::FaultProxy>> proxy = quark::testing::FaultProxy::Start(
      server_->endpoint(), R"([{"method":"PUT","path":"layer2","status":503,"times":-1}])");
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  storage::S3Config config = quark::testing::S3rver::ConfigFor((*proxy)->endpoint());
  config.max_attempts = 2;
  store_ = storage::MakeObjectStore(storage::StorageOptions{{root_}, config});
  cache_ = std::make_shared<storage::ModelCache>(store_, dir_.path() / "cache", 1 << 20);
  RecordingSink sink;
  CancelToken cancel;
  absl::StatusOr<quark::v1::JobResult> result =
      Runner().Run(Job(FileUri(root_ / "models/tiny"), "s3://test/failed-upload"), sink, cancel);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable) << result.status();
  EXPECT_NE(result.status().message().find("layer2.safetensors"), std::string::npos);
  storage::S3ObjectStore direct(server_->Config());
  EXPECT_EQ(direct.Head("s3://test/failed-upload/job-7/attempt-1/manifest.json").status().code(),
            absl::StatusCode::kNotFound);
  // What arrived before the failure (config.json, layer1) is removed: a failed attempt leaves nothing visible.
  absl::StatusOr<std::vector<storage::ObjectInfo>> left = direct.List("s3://test/failed-upload/job-7");
  ASSERT_TRUE(left.ok()) << left.status();
  EXPECT_TRUE(left->empty()) << left->size() << " objects left, first " << left->front().uri;
}

// #33 item 2: each attempt publishes into a folder of its own, and Discard (a run whose lease is gone) removes that
// folder only: a newer attempt's artifacts are never touched.
TEST_F(QuantizeJobRunnerTest, AttemptsPublishApartAndDiscardRemovesOnlyItsOwn) {
  RecordingSink sink;
  CancelToken cancel;
  quark::v1::Job first = Job(FileUri(root_ / "models/tiny"), FileUri(root_ / "out"));
  absl::StatusOr<quark::v1::JobResult> stale = Runner().Run(first, sink, cancel);
  ASSERT_TRUE(stale.ok()) << stale.status();
  quark::v1::Job second = first;
  second.add_attempts();
  pipeline_->layers = 2;  // the newer attempt's artifact differs
  absl::StatusOr<quark::v1::JobResult> newer = Runner().Run(second, sink, cancel);
  ASSERT_TRUE(newer.ok()) << newer.status();
  EXPECT_EQ(newer->manifest_uri(), FileUri(root_ / "out/job-7/attempt-2/manifest.json"));
  const std::string newer_manifest = quark::testing::ReadFile(root_ / "out/job-7/attempt-2/manifest.json");

  ASSERT_TRUE(Runner().Discard(first, LeaseContext{}, *stale).ok());
  EXPECT_FALSE(fs::exists(root_ / "out/job-7/attempt-1/manifest.json"));
  EXPECT_FALSE(fs::exists(root_ / "out/job-7/attempt-1/layer3.safetensors"));
  EXPECT_EQ(quark::testing::ReadFile(root_ / "out/job-7/attempt-2/manifest.json"), newer_manifest);
  EXPECT_TRUE(fs::exists(root_ / "out/job-7/attempt-2/layer2.safetensors"));
  // A result that is not this attempt's is refused, and nothing is removed.
  absl::Status wrong = Runner().Discard(first, LeaseContext{}, *newer);
  EXPECT_EQ(wrong.code(), absl::StatusCode::kInvalidArgument) << wrong;
  EXPECT_NE(wrong.message().find("result.manifest_uri"), std::string::npos) << wrong;
  EXPECT_TRUE(fs::exists(root_ / "out/job-7/attempt-2/manifest.json"));
}

// A worker killed -9 while it uploaded leaves part of its attempt's folder and no process to remove it (the chaos
// run's kill-worker fault): the attempt that publishes next removes every earlier attempt's folder, and nothing of
// another job's or its own.
TEST_F(QuantizeJobRunnerTest, ALaterAttemptRemovesWhatAKilledAttemptHalfUploaded) {
  quark::testing::WriteFile(root_ / "out/job-7/attempt-1/part1.bin", "half of a killed attempt's upload");
  quark::testing::WriteFile(root_ / "out/job-7/attempt-2/layer9.safetensors", "another killed attempt's upload");
  quark::testing::WriteFile(root_ / "out/job-8/attempt-1/part1.bin", "another job's");
  RecordingSink sink;
  CancelToken cancel;
  quark::v1::Job third = Job(FileUri(root_ / "models/tiny"), FileUri(root_ / "out"));
  third.add_attempts();
  third.add_attempts();
  absl::StatusOr<quark::v1::JobResult> result = Runner().Run(third, sink, cancel);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->manifest_uri(), FileUri(root_ / "out/job-7/attempt-3/manifest.json"));
  EXPECT_FALSE(fs::exists(root_ / "out/job-7/attempt-1/part1.bin"));
  EXPECT_FALSE(fs::exists(root_ / "out/job-7/attempt-2/layer9.safetensors"));
  EXPECT_TRUE(fs::exists(root_ / "out/job-7/attempt-3/manifest.json"));
  EXPECT_EQ(quark::testing::ReadFile(root_ / "out/job-8/attempt-1/part1.bin"), "another job's");
}

// Access key ids of the requests the proxy forwarded whose path starts with `path_prefix`, in order.
std::vector<std::string> KeysFor(const quark::testing::FaultProxy& proxy, const std::string& path_prefix) {
  std::vector<std::string> keys;
  std::istringstream lines(proxy.Log());
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string verb, method, path, key;
    words >> verb >> method >> path >> key;
    if (verb == "forward" && path.rfind(path_prefix, 0) == 0) keys.push_back(key.substr(4));
  }
  return keys;
}

quark::v1::internal::StorageCredentials Keys(const std::string& id, const std::string& secret) {
  quark::v1::internal::StorageCredentials credentials;
  credentials.set_access_key_id(id);
  credentials.set_secret_access_key(secret);
  return credentials;
}

// A lease's storage credentials sign every s3:// request of its job (model download, inputs, upload); a lease
// without them uses the worker's own keys. Downloads are cached per credentials.
TEST_F(QuantizeJobRunnerTest, LeaseCredentialsSignTheJobsRequests) {
  // An s3rver that knows exactly these keys (and S3RVER), behind a proxy that records each request's key id.
  absl::StatusOr<std::unique_ptr<quark::testing::S3rver>> s3 = quark::testing::S3rver::Start(
      "test", {{"WORKER-OWN-KEY", "worker-own-secret"}, {"AKIA-TENANT-A", "secret-of-AKIA-TENANT-A"},
               {"AKIA-TENANT-B", "secret-of-AKIA-TENANT-B"}});
  ASSERT_TRUE(s3.ok()) << s3.status();
  absl::StatusOr<std::unique_ptr<quark::testing::FaultProxy>> proxy =
      quark::testing::FaultProxy::Start((*s3)->endpoint(), "[]");
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  storage::StorageOptions worker{{root_}, quark::testing::S3rver::ConfigFor((*proxy)->endpoint())};
  worker.s3->credentials = {"WORKER-OWN-KEY", "worker-own-secret", ""};
  store_ = storage::MakeObjectStore(worker);
  cache_ = std::make_shared<storage::ModelCache>(store_, dir_.path() / "cache", 1 << 20);
  storage::S3ObjectStore direct((*s3)->Config());
  ASSERT_TRUE(direct.PutBytes("s3://test/lease/model/config.json", R"({"model_type":"llama"})").ok());
  ASSERT_TRUE(direct.PutBytes("s3://test/lease/calib.txt", "calibration in s3").ok());
  QuantizeJobRunnerOptions options{dir_.path() / "work"};
  options.lease_stores = std::make_shared<const LeaseStoreFactory>(worker);
  QuantizeJobRunner runner(options, store_, cache_, pipeline_);

  struct Run {
    std::string key_id;  // "" = a lease without credentials
    std::string output;
  };
  for (const Run& run : {Run{"AKIA-TENANT-A", "s3://test/lease/out-a"}, Run{"AKIA-TENANT-B", "s3://test/lease/out-b"},
                         Run{"", "s3://test/lease/out-own"}}) {
    quark::v1::Job job = Job("s3://test/lease/model", run.output);
    job.mutable_spec()->mutable_calibration()->set_uri("s3://test/lease/calib.txt");
    LeaseContext lease;
    if (!run.key_id.empty()) lease.storage_credentials = Keys(run.key_id, "secret-of-" + run.key_id);
    RecordingSink sink;
    CancelToken cancel;
    size_t before = KeysFor(**proxy, "/").size();
    absl::StatusOr<quark::v1::JobResult> result = runner.Run(job, lease, sink, cancel);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(pipeline_->calibration_text, "calibration in s3");
    std::vector<std::string> keys = KeysFor(**proxy, "/");
    keys.erase(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(before));
    std::string expected = run.key_id.empty() ? "WORKER-OWN-KEY" : run.key_id;
    ASSERT_FALSE(keys.empty());
    for (const std::string& key : keys) EXPECT_EQ(key, expected) << (*proxy)->Log();
    // The model is read with these keys too: tenant B's job does not get tenant A's cached download.
    std::vector<std::string> model_reads = KeysFor(**proxy, "/test/lease/model/config.json");
    ASSERT_FALSE(model_reads.empty());
    EXPECT_EQ(model_reads.back(), expected);
    std::string output_prefix = "/test/lease/" + run.output.substr(std::string("s3://test/lease/").size());
    EXPECT_FALSE(KeysFor(**proxy, output_prefix).empty()) << (*proxy)->Log();
    EXPECT_TRUE(direct.Head(result->manifest_uri()).ok());
  }
  EXPECT_EQ(KeysFor(**proxy, "/test/lease/model/config.json").size(), 3u) << "one download per set of keys";
}

TEST_F(QuantizeJobRunnerTest, LeaseCredentialsWithoutAFactoryOrHalfAPairAreRefused) {
  RecordingSink sink;
  CancelToken cancel;
  LeaseContext lease;
  lease.storage_credentials = Keys("AKIA-X", "secret-x");
  absl::StatusOr<quark::v1::JobResult> result =
      Runner().Run(Job(FileUri(root_ / "models/tiny"), FileUri(root_ / "out")), lease, sink, cancel);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition) << result.status();

  LeaseStoreFactory factory(storage::StorageOptions{{root_}, server_->Config()});
  quark::v1::internal::StorageCredentials half;
  half.set_access_key_id("AKIA-HALF");
  absl::StatusOr<std::shared_ptr<storage::ObjectStore>> store = factory.ForCredentials(half);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.status().message().find("AKIA-HALF"), std::string::npos) << store.status();
  quark::v1::internal::StorageCredentials bad_endpoint = Keys("AKIA-X", "secret-x");
  bad_endpoint.set_endpoint("127.0.0.1:9000");
  EXPECT_EQ(factory.ForCredentials(bad_endpoint).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(factory.CacheScope(Keys("AKIA-A", "s")), factory.CacheScope(Keys("AKIA-B", "s")));
}

// #29: a lease with its tenant's roots confines the job to them (TenantObjectStore); such a lease is never run
// unconfined by a runner without a lease store factory.
TEST_F(QuantizeJobRunnerTest, TenantRootsConfineTheJobAndNeedAFactory) {
  LeaseContext lease;
  lease.tenant_roots.add_model_roots(FileUri(root_ / "models"));
  lease.tenant_roots.add_output_prefixes(FileUri(root_ / "out"));
  RecordingSink sink;
  CancelToken cancel;
  quark::v1::Job job = Job(FileUri(root_ / "models/tiny"), FileUri(root_ / "out"));
  absl::Status unconfined = Runner().Run(job, lease, sink, cancel).status();
  EXPECT_EQ(unconfined.code(), absl::StatusCode::kFailedPrecondition) << unconfined;
  EXPECT_NE(unconfined.message().find("tenant_roots"), std::string::npos) << unconfined;

  QuantizeJobRunnerOptions options{dir_.path() / "work"};
  options.lease_stores = std::make_shared<const LeaseStoreFactory>(storage::StorageOptions{{root_}, server_->Config()});
  QuantizeJobRunner runner(options, store_, cache_, pipeline_);
  absl::StatusOr<quark::v1::JobResult> result = runner.Run(job, lease, sink, cancel);
  ASSERT_TRUE(result.ok()) << result.status();
  // calib.txt lies in the worker's root but outside the tenant's: refused before anything is fetched.
  job.mutable_spec()->mutable_calibration()->set_uri(FileUri(root_ / "calib.txt"));
  absl::Status outside = runner.Run(job, lease, sink, cancel).status();
  EXPECT_EQ(outside.code(), absl::StatusCode::kPermissionDenied) << outside;
  EXPECT_NE(outside.message().find("spec.calibration.uri"), std::string::npos) << outside;
}

TEST_F(QuantizeJobRunnerTest, AGpuJobComputesOnTheWorkersFirstCudaDevice) {
  QuantizeJobRunnerOptions options{dir_.path() / "work"};
  options.devices = {"cpu", "cuda:1", "cuda:0"};
  QuantizeJobRunner runner(options, store_, cache_, pipeline_);
  RecordingSink sink;
  CancelToken cancel;
  quark::v1::Job job = Job(FileUri(root_ / "models/tiny"), FileUri(root_ / "out"));
  ASSERT_TRUE(runner.Run(job, sink, cancel).ok());
  EXPECT_EQ(pipeline_->seen.device, "cpu");  // no GPUs asked for
  job.set_id("job-8");
  job.mutable_spec()->mutable_resources()->set_gpus(1);
  ASSERT_TRUE(runner.Run(job, sink, cancel).ok());
  EXPECT_EQ(pipeline_->seen.device, "cuda:1");
  EXPECT_EQ(EngineDevice(job.spec(), {"cpu"}), "cpu");
}

TEST(RedactTest, EveryKeyFieldIsReplaced) {
  quark::v1::internal::StorageCredentials credentials = Keys("AKIA", "AKIA-and-more-secret");
  credentials.set_session_token("token-123");
  EXPECT_EQ(Redact("id AKIA secret AKIA-and-more-secret token token-123 AKIAAKIA", credentials),
            "id [redacted] secret [redacted] token [redacted] [redacted][redacted]");
  EXPECT_EQ(Redact("nothing here", quark::v1::internal::StorageCredentials()), "nothing here");
}

// The worker re-checks links when it reads (quarkd checked them at submit): a hard-linked calibration file or
// model file is refused with the field named.
TEST_F(QuantizeJobRunnerTest, HardLinkedInputsAreRefusedAtReadTime) {
  RecordingSink sink;
  CancelToken cancel;
  fs::create_hard_link(root_ / "calib.txt", root_ / "calib-link.txt");
  quark::v1::Job job = Job(FileUri(root_ / "models/tiny"), FileUri(root_ / "out"));
  job.mutable_spec()->mutable_calibration()->set_uri(FileUri(root_ / "calib.txt"));
  absl::StatusOr<quark::v1::JobResult> calib = Runner().Run(job, sink, cancel);
  EXPECT_EQ(calib.status().code(), absl::StatusCode::kPermissionDenied) << calib.status();
  EXPECT_EQ(calib.status().message().rfind("spec.calibration.uri: ", 0), 0u) << calib.status();
  EXPECT_NE(calib.status().message().find("hard link"), std::string::npos) << calib.status();

  fs::create_hard_link(root_ / "models/tiny/config.json", root_ / "config-elsewhere.json");
  absl::StatusOr<quark::v1::JobResult> model =
      Runner().Run(Job(FileUri(root_ / "models/tiny"), FileUri(root_ / "out")), sink, cancel);
  EXPECT_EQ(model.status().code(), absl::StatusCode::kPermissionDenied) << model.status();
  EXPECT_EQ(model.status().message().rfind("model_uri: ", 0), 0u) << model.status();
  EXPECT_NE(model.status().message().find("config.json is a hard link"), std::string::npos) << model.status();
  EXPECT_FALSE(fs::exists(root_ / "out/job-7"));
}

}  // namespace
}  // namespace quark::worker
