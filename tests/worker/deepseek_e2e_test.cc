// DeepSeek-V3 (#32) through the whole house: quarkd spawns the real quark-worker, which quantizes the tiny synthetic
// DeepSeek-V3 (MLA with YaRN, a dense layer then an MoE layer of 16 routed experts in 4 groups and a shared expert, an
// MTP layer) with uint4 g32 + GPTQ and publishes HF-quark and a deepseek2 GGUF (F32) to file://. Both exports are read
// back by the worker to the fake-quantized model's perplexity; the HF-quark export keeps the MTP layer float.
// The synthetic config gets mscale_all_dim = mscale (as DeepSeek-V3's own config.json has it): llama.cpp's deepseek2
// cannot express YaRN's cos/sin scaling otherwise, and the export refuses it.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/runtime/synthetic_model.h"
#include "quark/v1/service.grpc.pb.h"
#include "tests/support/require_peer.h"
#include "tests/worker/support/quarkd.h"
#include "tests/worker/support/run_job.h"

namespace quark::worker {
namespace {

namespace fs = std::filesystem;

std::string Fixtures() {
  return quark::testing::EnvOr("QUARK_SHARED_DIR", QUARK_TEST_SOURCE_DIR "/../shared") + "/fixtures";
}

// The tiny DeepSeek-V3 in `dir` with stories260K's tokenizer and the mscale change above.
void MakeTinyDeepseek(const fs::path& dir) {
  runtime::SyntheticModelOptions options;
  options.arch = "deepseek_v3";
  options.shape = "tiny";
  options.dtype = "f32";
  options.seed = 33;
  options.out_dir = dir.string();
  options.tokenizer_path = Fixtures() + "/stories260K/tokenizer.model";
  ASSERT_TRUE(runtime::MakeSyntheticModel(options).ok());
  nlohmann::json config;
  std::ifstream(dir / "config.json") >> config;
  config["rope_scaling"]["mscale_all_dim"] = config["rope_scaling"]["mscale"];
  std::ofstream(dir / "config.json") << config.dump(2);
}

// quarkd with one real quark-worker (and `env` for both), reading the fixtures.
absl::StatusOr<std::unique_ptr<quark::testing::Quarkd>> StartQuarkd(const std::vector<std::string>& env = {}) {
  quark::testing::QuarkdOptions options;
  options.workers = 1;
  options.test_mode = "";
  options.worker_binary = "worker/quark-worker";
  options.extra_roots = {Fixtures()};
  options.env = env;
  return quark::testing::Quarkd::Start(options);
}

// A job on the tiny DeepSeek-V3 at `model` with `preset`, published under quarkd's root, calibrated on 4 x 48 tokens
// and evaluated on 2 windows of 64.
quark::v1::SubmitJobRequest TinyDeepseekJob(const quark::testing::Quarkd& quarkd, const fs::path& model,
                                            const std::string& preset) {
  quark::v1::SubmitJobRequest request;
  quark::v1::JobSpec* spec = request.mutable_spec();
  spec->set_model_uri("file://" + model.string());
  spec->set_output_uri("file://" + (quarkd.root() / "out").string());
  spec->set_max_attempts(1);
  spec->set_preset(preset);
  spec->add_export_formats(quark::v1::EXPORT_FORMAT_HF_QUARK);
  spec->mutable_calibration()->set_uri("file://" + Fixtures() + "/eval/tinystories_train_split.txt");
  spec->mutable_calibration()->set_num_samples(4);
  spec->mutable_calibration()->set_seq_len(48);
  spec->mutable_evaluation()->set_uri("file://" + Fixtures() + "/eval/tinystories_heldout_split.txt");
  spec->mutable_evaluation()->set_seq_len(64);
  spec->mutable_evaluation()->set_max_windows(2);
  return request;
}

TEST(DeepseekE2eTest, GptqJobPublishesHfQuarkAndGgufThatReadBackToTheQuantizedPerplexity) {
  auto quarkd = StartQuarkd();
  ASSERT_TRUE(quarkd.ok()) << quarkd.status();
  const fs::path model = (*quarkd)->root() / "deepseek";
  MakeTinyDeepseek(model);
  auto stub = quark::v1::QuantizationService::NewStub(
      grpc::CreateChannel((*quarkd)->address(), grpc::InsecureChannelCredentials()));

  quark::v1::SubmitJobRequest request = TinyDeepseekJob(**quarkd, model, "uint4_wo_32");
  quark::v1::JobSpec* spec = request.mutable_spec();
  spec->add_algo_config()->mutable_gptq()->set_damp_percent(0.01f);
  spec->add_export_formats(quark::v1::EXPORT_FORMAT_GGUF);
  spec->set_gguf_type("F32");
  std::vector<quark::v1::JobEvent> events;
  const quark::v1::Job done = quark::testing::RunJobToEnd(*stub, request, events);
  ASSERT_EQ(done.state(), quark::v1::JOB_STATE_SUCCEEDED) << done.DebugString() << (*quarkd)->Log();

  const auto& metrics = done.result().metrics();
  for (const char* key : {"ppl_before", "ppl_after", "ppl_reloaded", "ppl_gguf"}) {
    ASSERT_TRUE(metrics.count(key)) << key << " missing: " << done.DebugString();
  }
  EXPECT_NE(metrics.at("ppl_after"), metrics.at("ppl_before"));
  EXPECT_NEAR(metrics.at("ppl_reloaded") / metrics.at("ppl_after"), 1.0, 1e-4);
  // The GGUF holds the dequantized uint4 weights in F32: llama.cpp's layout read back computes the same model.
  EXPECT_NEAR(metrics.at("ppl_gguf") / metrics.at("ppl_after"), 1.0, 1e-4);

  // Each attempt publishes into a folder of its own (#33 item 2): this job's only attempt.
  const fs::path folder = (*quarkd)->root() / "out" / done.id() / ("attempt-" + std::to_string(done.attempts_size()));
  ASSERT_TRUE(fs::exists(folder / "model.gguf")) << folder;
  nlohmann::json config;
  std::ifstream(folder / "hf_quark" / "config.json") >> config;
  EXPECT_EQ(config["model_type"], "deepseek_v3");
  const auto& algo = config["quantization_config"]["algo_config"];
  ASSERT_EQ(algo.size(), 1u);
  EXPECT_EQ(algo[0]["name"], "gptq");
  const auto& exclude = config["quantization_config"]["exclude"];
  const std::string mtp = "model.layers." + std::to_string(config["num_hidden_layers"].get<int>()) + ".eh_proj";
  EXPECT_NE(std::find(exclude.begin(), exclude.end(), mtp), exclude.end()) << exclude.dump();
}

// #32 item 5 through the service: a worker whose memory budget is below the layer's estimated peak streams the routed
// experts in groups on its own (JobSpec has no field for it), says so in the job's log, and publishes the bytes a
// worker with memory to spare publishes.
// A worker short of memory (QUARK_WORKER_MEMORY_BUDGET_GB below any estimate) streams one expert at a time and
// publishes the bytes a roomy one does: fp8 (RTN), and uint4_wo_32 + GPTQ, which runs expert by expert and without
// its layer checkpoint (the worker says so in the job's log).
void ExpectAWorkerShortOfMemoryStreamsTheExperts(const std::string& preset, bool gptq) {
  struct Run {
    quark::v1::Job job;
    std::string log;
    std::string weights;
  };
  const auto run = [&](const std::vector<std::string>& env) -> Run {
    auto quarkd = StartQuarkd(env);
    EXPECT_TRUE(quarkd.ok()) << quarkd.status();
    if (!quarkd.ok()) return {};
    const fs::path model = (*quarkd)->root() / "deepseek";
    MakeTinyDeepseek(model);
    auto stub = quark::v1::QuantizationService::NewStub(
        grpc::CreateChannel((*quarkd)->address(), grpc::InsecureChannelCredentials()));
    quark::v1::SubmitJobRequest request = TinyDeepseekJob(**quarkd, model, preset);
    if (gptq) request.mutable_spec()->add_algo_config()->mutable_gptq()->set_damp_percent(0.01f);
    std::vector<quark::v1::JobEvent> events;
    Run out;
    out.job = quark::testing::RunJobToEnd(*stub, request, events);
    EXPECT_EQ(out.job.state(), quark::v1::JOB_STATE_SUCCEEDED) << out.job.DebugString() << (*quarkd)->Log();
    for (const quark::v1::JobEvent& event : events) {
      if (event.has_log()) out.log += event.log() + "\n";
    }
    const fs::path folder =
        (*quarkd)->root() / "out" / out.job.id() / ("attempt-" + std::to_string(out.job.attempts_size()));
    // One export format: its files are the attempt folder's own.
    std::ifstream in(folder / "model.safetensors", std::ios::binary);
    out.weights.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    return out;
  };
  const Run roomy = run({});
  const Run short_of_memory = run({"QUARK_WORKER_MEMORY_BUDGET_GB=0.000001"});
  EXPECT_EQ(roomy.log.find("expert_group_size"), std::string::npos) << roomy.log;
  EXPECT_NE(short_of_memory.log.find("streaming one expert at a time"), std::string::npos) << short_of_memory.log;
  // The engine's own word that it streamed (QuantizeRun's notice), not only the worker's choice.
  EXPECT_NE(short_of_memory.log.find("routed experts streamed in groups of 1"), std::string::npos)
      << short_of_memory.log;
  EXPECT_EQ(roomy.log.find("routed experts streamed"), std::string::npos) << roomy.log;
  EXPECT_EQ(short_of_memory.log.find("layer checkpoint off") != std::string::npos, gptq) << short_of_memory.log;
  EXPECT_EQ(short_of_memory.log.find("streamed expert linears kept in") != std::string::npos, gptq)
      << short_of_memory.log;
  ASSERT_GT(roomy.weights.size(), 1000u);
  EXPECT_TRUE(short_of_memory.weights == roomy.weights) << "the streamed job published other weights";
  for (const char* key : {"ppl_before", "ppl_after", "ppl_reloaded"}) {
    ASSERT_TRUE(roomy.job.result().metrics().count(key)) << key;
    EXPECT_EQ(short_of_memory.job.result().metrics().at(key), roomy.job.result().metrics().at(key)) << key;
  }
}

TEST(DeepseekE2eTest, AWorkerShortOfMemoryStreamsTheExpertsAndPublishesTheSameBytes) {
  ExpectAWorkerShortOfMemoryStreamsTheExperts("fp8", /*gptq=*/false);
}

TEST(DeepseekE2eTest, AWorkerShortOfMemoryRunsGptqExpertByExpertAndPublishesTheSameBytes) {
  ExpectAWorkerShortOfMemoryStreamsTheExperts("uint4_wo_32", /*gptq=*/true);
}

}  // namespace
}  // namespace quark::worker
