// The whole house with the real engine: quarkd spawns the real quark-worker, which quantizes the stories260K
// fixture (fp8, a few calibration samples) and publishes the HF-quark export into a real s3rver bucket, with
// manifest.json last.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "quark/v1/service.grpc.pb.h"
#include "tests/export/gguf_llama_cpp.h"
#include "tests/storage/support/s3_test_base.h"
#include "tests/support/require_peer.h"
#include "tests/worker/support/quarkd.h"
#include "tests/worker/support/run_job.h"
#include "worker/storage/s3_object_store.h"

namespace quark::worker {
namespace {

class EngineE2eTest : public quark::testing::S3TestBase {
 protected:
  static std::string Fixtures() {
    return quark::testing::EnvOr("QUARK_SHARED_DIR", QUARK_TEST_SOURCE_DIR "/../shared") + "/fixtures";
  }

  // quarkd with one real quark-worker that may read the fixtures and write to the s3rver.
  absl::StatusOr<std::unique_ptr<quark::testing::Quarkd>> StartQuarkd() {
    quark::testing::QuarkdOptions options;
    options.workers = 1;
    options.test_mode = "";
    options.worker_binary = "worker/quark-worker";
    options.extra_roots = {Fixtures()};
    options.env = server_->Env();
    return quark::testing::Quarkd::Start(options);
  }

  // A job on tinyllama-a with 4 calibration samples of 64 tokens (TinyStories train) and 2 evaluation windows of 128
  // (held-out), one attempt, artifacts under `output_uri`; the test adds the quantization and the exports.
  static quark::v1::SubmitJobRequest SmallTinyllamaJob(const std::string& output_uri) {
    const std::string fixtures = Fixtures();
    quark::v1::SubmitJobRequest request;
    quark::v1::JobSpec* spec = request.mutable_spec();
    spec->set_model_uri("file://" + fixtures + "/tinyllama-a");
    spec->set_output_uri(output_uri);
    spec->set_max_attempts(1);
    spec->mutable_calibration()->set_uri("file://" + fixtures + "/eval/tinystories_train_split.txt");
    spec->mutable_calibration()->set_num_samples(4);
    spec->mutable_calibration()->set_seq_len(64);
    spec->mutable_evaluation()->set_uri("file://" + fixtures + "/eval/tinystories_heldout_split.txt");
    spec->mutable_evaluation()->set_seq_len(128);
    spec->mutable_evaluation()->set_max_windows(2);
    return request;
  }
};

// GPTQ through the whole house: a job asks for it in algo_config on top of a preset, the worker runs it layer by
// layer (progress per module), and the published export records it.
TEST_F(EngineE2eTest, GptqJobOnTinyllamaPublishesACheckedExport) {
  absl::StatusOr<std::unique_ptr<quark::testing::Quarkd>> quarkd = StartQuarkd();
  ASSERT_TRUE(quarkd.ok()) << quarkd.status();
  auto stub = quark::v1::QuantizationService::NewStub(
      grpc::CreateChannel((*quarkd)->address(), grpc::InsecureChannelCredentials()));

  quark::v1::SubmitJobRequest request = SmallTinyllamaJob("s3://test/gptq");
  quark::v1::JobSpec* spec = request.mutable_spec();
  spec->set_preset("uint4_wo_128");
  spec->add_algo_config()->mutable_gptq()->set_damp_percent(0.01f);
  std::vector<quark::v1::JobEvent> events;
  const quark::v1::Job done = quark::testing::RunJobToEnd(*stub, request, events);
  ASSERT_EQ(done.state(), quark::v1::JOB_STATE_SUCCEEDED) << done.DebugString() << (*quarkd)->Log();
  // Quantize progress streams (per-module "gptq ..." messages are checked in GptqPipelineTest: the worker coalesces
  // events closer together than its interval, so which of them reach a client depends on timing).
  EXPECT_TRUE(std::any_of(events.begin(), events.end(),
                          [](const quark::v1::JobEvent& e) { return e.progress().phase() == "quantize"; }));
  const auto& metrics = done.result().metrics();
  ASSERT_TRUE(metrics.count("ppl_after") && metrics.count("ppl_reloaded")) << done.DebugString();
  EXPECT_NEAR(metrics.at("ppl_reloaded") / metrics.at("ppl_after"), 1.0, 1e-4);

  storage::S3ObjectStore bucket(server_->Config());
  absl::StatusOr<std::string> config = bucket.GetBytes("s3://test/gptq/" + done.id() + "/attempt-1/config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  const auto algo = nlohmann::json::parse(*config)["quantization_config"]["algo_config"];
  ASSERT_EQ(algo.size(), 1u) << *config;
  EXPECT_EQ(algo[0]["name"], "gptq");
  EXPECT_EQ(algo[0]["inside_layer_modules"].size(), 7u);
}

// #27: spec.resources.compute_dtype reaches the worker's engine: the same job in bf16 computes its float model in
// bf16 (another perplexity before quantization), still publishes a checked export, and is not deduplicated onto the
// float32 job (its content key differs).
TEST_F(EngineE2eTest, ComputeDtypeBf16ReachesTheEngine) {
  absl::StatusOr<std::unique_ptr<quark::testing::Quarkd>> quarkd = StartQuarkd();
  ASSERT_TRUE(quarkd.ok()) << quarkd.status();
  auto stub = quark::v1::QuantizationService::NewStub(
      grpc::CreateChannel((*quarkd)->address(), grpc::InsecureChannelCredentials()));
  std::map<std::string, quark::v1::Job> done;
  for (const char* dtype : {"f32", "bf16"}) {
    quark::v1::SubmitJobRequest request = SmallTinyllamaJob(std::string("s3://test/dtype-") + dtype);
    request.mutable_spec()->set_preset("uint4_wo_128");
    request.mutable_spec()->mutable_resources()->set_compute_dtype(dtype);
    std::vector<quark::v1::JobEvent> events;
    done[dtype] = quark::testing::RunJobToEnd(*stub, request, events);
    ASSERT_EQ(done[dtype].state(), quark::v1::JOB_STATE_SUCCEEDED) << done[dtype].DebugString() << (*quarkd)->Log();
  }
  EXPECT_NE(done["f32"].id(), done["bf16"].id());
  const auto& f32 = done["f32"].result().metrics();
  const auto& bf16 = done["bf16"].result().metrics();
  ASSERT_TRUE(f32.count("ppl_before") && bf16.count("ppl_before") && bf16.count("ppl_reloaded"));
  EXPECT_NE(f32.at("ppl_before"), bf16.at("ppl_before")) << "the bf16 job computed in float32";
  EXPECT_NEAR(bf16.at("ppl_before") / f32.at("ppl_before"), 1.0, 0.01);
  EXPECT_NEAR(bf16.at("ppl_reloaded") / bf16.at("ppl_after"), 1.0, 1e-2);
}

// AWQ and every export format in one job: the worker writes HF-quark, GGUF and ONNX in one pass over the model and
// publishes all three under one manifest; the GGUF read back gives the fake-quantized model's perplexity.
TEST_F(EngineE2eTest, AwqJobPublishesEveryExportFormat) {
  absl::StatusOr<std::unique_ptr<quark::testing::Quarkd>> quarkd = StartQuarkd();
  ASSERT_TRUE(quarkd.ok()) << quarkd.status();
  auto stub = quark::v1::QuantizationService::NewStub(
      grpc::CreateChannel((*quarkd)->address(), grpc::InsecureChannelCredentials()));
  quark::v1::SubmitJobRequest request = SmallTinyllamaJob("s3://test/formats");
  quark::v1::JobSpec* spec = request.mutable_spec();
  spec->set_preset("uint4_wo_32");
  spec->add_algo_config()->mutable_awq();
  spec->add_export_formats(quark::v1::EXPORT_FORMAT_HF_QUARK);
  spec->add_export_formats(quark::v1::EXPORT_FORMAT_GGUF);
  spec->add_export_formats(quark::v1::EXPORT_FORMAT_ONNX);
  std::vector<quark::v1::JobEvent> events;
  const quark::v1::Job done = quark::testing::RunJobToEnd(*stub, request, events);
  ASSERT_EQ(done.state(), quark::v1::JOB_STATE_SUCCEEDED) << done.DebugString() << (*quarkd)->Log();
  const auto& metrics = done.result().metrics();
  ASSERT_TRUE(metrics.count("ppl_gguf") && metrics.count("ppl_reloaded")) << done.DebugString();
  EXPECT_NEAR(metrics.at("ppl_gguf") / metrics.at("ppl_after"), 1.0, 1e-3);
  storage::S3ObjectStore bucket(server_->Config());
  const std::string root = "s3://test/formats/" + done.id() + "/attempt-1/";
  for (const char* file : {"hf_quark/config.json", "hf_quark/model.safetensors", "model.gguf", "onnx/model.onnx",
                           "onnx/model.onnx.data"}) {
    EXPECT_TRUE(bucket.GetBytes(root + file).ok()) << file;
  }
  absl::StatusOr<std::string> config = bucket.GetBytes(root + "hf_quark/config.json");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(nlohmann::json::parse(*config)["quantization_config"]["algo_config"][0]["name"], "awq");
}

// A K-quant GGUF job over RPC (#37): a rotation of the float weights, then llama.cpp's Q4_K_M (no scheme) with the
// importance matrix of the job's own calibration (of the rotated model); the worker publishes model.gguf and
// imatrix.gguf, and llama.cpp loads the GGUF (with output.weight: the rotation unties the embeddings).
TEST_F(EngineE2eTest, KQuantJobWithCalibrationImatrixGivesAGgufLlamaCppLoads) {
  std::string why;
  const quark::testing::LlamaCpp* llama = quark::testing::LoadLlamaCpp(&why);
  if (llama == nullptr || llama->load_model == nullptr) QUARK_PEER_MISSING() << "libllama not loaded: " << why;
  absl::StatusOr<std::unique_ptr<quark::testing::Quarkd>> quarkd = StartQuarkd();
  ASSERT_TRUE(quarkd.ok()) << quarkd.status();
  auto stub = quark::v1::QuantizationService::NewStub(
      grpc::CreateChannel((*quarkd)->address(), grpc::InsecureChannelCredentials()));
  quark::v1::SubmitJobRequest request = SmallTinyllamaJob("s3://test/kquant");
  quark::v1::JobSpec* spec = request.mutable_spec();
  spec->add_export_formats(quark::v1::EXPORT_FORMAT_GGUF);
  spec->set_gguf_type("Q4_K_M");
  spec->set_gguf_imatrix_from_calibration(true);
  spec->add_algo_config()->mutable_rotation();
  std::vector<quark::v1::JobEvent> events;
  const quark::v1::Job done = quark::testing::RunJobToEnd(*stub, request, events);
  ASSERT_EQ(done.state(), quark::v1::JOB_STATE_SUCCEEDED) << done.DebugString() << (*quarkd)->Log();
  const auto& metrics = done.result().metrics();
  ASSERT_TRUE(metrics.count("ppl_gguf") && metrics.count("ppl_before")) << done.DebugString();
  EXPECT_LT(metrics.at("ppl_gguf") / metrics.at("ppl_before"), 1.1) << "Q4_K_M of tinyllama-a";
  storage::S3ObjectStore bucket(server_->Config());
  const std::string root = "s3://test/kquant/" + done.id() + "/attempt-1/";
  absl::StatusOr<std::string> imatrix = bucket.GetBytes(root + "imatrix.gguf");
  ASSERT_TRUE(imatrix.ok()) << imatrix.status();
  EXPECT_EQ(imatrix->substr(0, 4), "GGUF");
  EXPECT_NE(imatrix->find("blk.0.ffn_down.weight.in_sum2"), std::string::npos);
  absl::StatusOr<std::string> gguf = bucket.GetBytes(root + "model.gguf");
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  const std::string local = ::testing::TempDir() + "/kquant_" + done.id() + ".gguf";
  std::ofstream(local, std::ios::binary) << *gguf;
  uint64_t n_params = 0;
  EXPECT_EQ(llama->load_model(local, &n_params), "");
  EXPECT_GT(n_params, 0u);
  std::remove(local.c_str());
}

// The accuracy gate through the whole house: a bound of 0 (no perplexity increase at all) fails the job with
// FAILED_PRECONDITION naming the figures, nothing is published, and the job's result still holds the perplexities.
TEST_F(EngineE2eTest, AccuracyGateFailsTheJobAndKeepsItsFigures) {
  const std::string fixtures = Fixtures();
  absl::StatusOr<std::unique_ptr<quark::testing::Quarkd>> quarkd = StartQuarkd();
  ASSERT_TRUE(quarkd.ok()) << quarkd.status();
  auto stub = quark::v1::QuantizationService::NewStub(
      grpc::CreateChannel((*quarkd)->address(), grpc::InsecureChannelCredentials()));
  quark::v1::SubmitJobRequest request;
  quark::v1::JobSpec* spec = request.mutable_spec();
  spec->set_model_uri("file://" + fixtures + "/stories260K");
  spec->set_preset("w_int8_per_tensor_sym");
  spec->set_output_uri("s3://test/gate");
  spec->set_max_attempts(1);
  spec->mutable_evaluation()->set_uri("file://" + fixtures + "/eval/tinystories_validation_prefix.txt");
  spec->mutable_evaluation()->set_seq_len(128);
  spec->mutable_evaluation()->set_max_windows(2);
  spec->mutable_evaluation()->set_max_ppl_increase(0.0);
  std::vector<quark::v1::JobEvent> events;
  const quark::v1::Job done = quark::testing::RunJobToEnd(*stub, request, events);
  ASSERT_EQ(done.state(), quark::v1::JOB_STATE_FAILED) << done.DebugString() << (*quarkd)->Log();
  EXPECT_NE(done.error().find("FAILED_PRECONDITION: accuracy gate: perplexity +"), std::string::npos) << done.error();
  const auto& metrics = done.result().metrics();
  ASSERT_TRUE(metrics.count("ppl_before") && metrics.count("ppl_after") && metrics.count("ppl_reloaded"))
      << done.DebugString();
  EXPECT_GT(std::max(metrics.at("ppl_after"), metrics.at("ppl_reloaded")), metrics.at("ppl_before"));
  EXPECT_EQ(done.result().artifacts_size(), 0);
  storage::S3ObjectStore bucket(server_->Config());
  EXPECT_FALSE(bucket.GetBytes("s3://test/gate/" + done.id() + "/attempt-1/manifest.json").ok())
      << "nothing is published";
}

TEST_F(EngineE2eTest, Stories260KLandsInS3rverWithManifest) {
  const std::string fixtures = Fixtures();
  absl::StatusOr<std::unique_ptr<quark::testing::Quarkd>> quarkd = StartQuarkd();
  ASSERT_TRUE(quarkd.ok()) << quarkd.status();
  auto stub = quark::v1::QuantizationService::NewStub(
      grpc::CreateChannel((*quarkd)->address(), grpc::InsecureChannelCredentials()));

  quark::v1::SubmitJobRequest request;
  quark::v1::JobSpec* spec = request.mutable_spec();
  spec->set_model_uri("file://" + fixtures + "/stories260K");
  spec->set_preset("fp8");
  spec->set_output_uri("s3://test/engine");
  spec->set_max_attempts(1);
  spec->mutable_calibration()->set_num_samples(2);
  spec->mutable_calibration()->set_seq_len(32);
  // Perplexity before, after, and of the export read back from disk (ppl_reloaded): the exported checkpoint
  // reloads and evaluates. With no calibration uri the static fp8 scales calibrate on this text.
  spec->mutable_evaluation()->set_uri("file://" + fixtures + "/eval/tinystories_validation_prefix.txt");
  spec->mutable_evaluation()->set_seq_len(128);
  spec->mutable_evaluation()->set_max_windows(2);
  std::vector<quark::v1::JobEvent> events;
  const quark::v1::Job done = quark::testing::RunJobToEnd(*stub, request, events);
  ASSERT_EQ(done.state(), quark::v1::JOB_STATE_SUCCEEDED) << done.DebugString() << (*quarkd)->Log();
  EXPECT_TRUE(std::any_of(events.begin(), events.end(),
                          [](const quark::v1::JobEvent& e) { return e.progress().phase() == "quantize"; }));
  const quark::v1::Job& job = done;
  quark::v1::WatchJobRequest watch;
  watch.set_id(job.id());
  quark::v1::JobEvent event;

  storage::S3ObjectStore bucket(server_->Config());
  absl::StatusOr<std::string> manifest_text = bucket.GetBytes(done.result().manifest_uri());
  ASSERT_TRUE(manifest_text.ok()) << manifest_text.status();
  nlohmann::json manifest = nlohmann::json::parse(*manifest_text);
  bool has_weights = false;
  bool has_config = false;
  for (const auto& file : manifest["files"]) {
    has_weights |= file["path"].get<std::string>().find(".safetensors") != std::string::npos;
    has_config |= file["path"] == "config.json";
    absl::StatusOr<storage::ObjectInfo> info =
        bucket.Head("s3://test/engine/" + job.id() + "/attempt-1/" + file["path"].get<std::string>());
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->size_bytes, file["size_bytes"].get<int64_t>());
  }
  EXPECT_TRUE(has_weights) << manifest.dump(2);
  EXPECT_TRUE(has_config) << manifest.dump(2);
  EXPECT_TRUE(manifest["config"].is_object()) << manifest.dump(2);
  EXPECT_GT(done.result().metrics().at("seconds_total"), 0.0);
  const auto& metrics = done.result().metrics();
  ASSERT_TRUE(metrics.count("ppl_before") && metrics.count("ppl_after") && metrics.count("ppl_reloaded"))
      << done.DebugString();
  EXPECT_GT(metrics.at("ppl_before"), 1.0);
  EXPECT_NEAR(metrics.at("ppl_reloaded") / metrics.at("ppl_after"), 1.0, 1e-4);

  // A client that watches the finished job from the start sees every phase, replayed from the durable event log;
  // quarkd ends the stream after the job's last event.
  grpc::ClientContext replay_context;
  replay_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  auto replay = stub->WatchJob(&replay_context, watch);
  std::set<std::string> phases;
  int replayed = 0;
  while (replay->Read(&event)) {
    ++replayed;
    if (event.has_progress()) phases.insert(event.progress().phase());
  }
  EXPECT_TRUE(replay->Finish().ok());
  for (const char* phase : {"fetch", "load", "quantize", "export", "evaluate", "upload"}) {
    EXPECT_TRUE(phases.count(phase)) << "phase " << phase << " not in the " << replayed << " replayed events";
  }
}

}  // namespace
}  // namespace quark::worker
