// DeepSeek-V3 (#32) through the streamed pipeline every family uses. ModelConfig (family kDeepseek), TransformerModel
// and the LayerStreamer compute the logits of the family's own forward (deepseek_model.h, checked against a float64
// port of HF's modeling code in tests/runtime/deepseek_test); QuantizeModel runs fp8, uint4 RTN and GPTQ on the tiny
// model, exports HF-quark (routers and the MTP layer float, copied and excluded; the vLLM rules with
// DeepseekConfigProblems pass) and reads the export back to the fake-quantized model's perplexity; SmoothQuant, AWQ
// and rotation are refused naming algo_config[i]; the MTP layer is no module of the plan.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/model_config.h"
#include "core/checkpoint/model_modules.h"
#include "core/config/presets.h"
#include "core/export/hf_quark_checker.h"
#include "core/quantize/quantize_model.h"
#include "core/runtime/deepseek_model.h"
#include "core/runtime/layer_streamer.h"
#include "core/runtime/synthetic_model.h"
#include "tests/runtime/test_paths.h"

namespace quark::quantize {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// `quark make-model --arch deepseek_v3 --shape tiny --dtype f32` with stories260K's tokenizer (512 pieces).
class DeepseekPipelineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    runtime::testing::InitTestEngine();
    dir_ = new std::string(
        (fs::temp_directory_path() / ("quark_deepseek_pipeline_" + std::to_string(::getpid()))).string());
    fs::remove_all(*dir_);
    runtime::SyntheticModelOptions options;
    options.arch = "deepseek_v3";
    options.shape = "tiny";
    options.dtype = "f32";
    options.seed = 21;
    options.out_dir = *dir_;
    options.tokenizer_path = runtime::testing::Stories260K() + "/tokenizer.model";
    ASSERT_TRUE(runtime::MakeSyntheticModel(options).ok());
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  void TearDown() override {
    for (const std::string& out : outputs_) fs::remove_all(out);
  }

  QuantizeModelOptions Options(const std::string& preset, const std::string& name) {
    QuantizeModelOptions o;
    o.config = PresetConfig(preset).value();
    o.eval_text_file = runtime::testing::TinyStoriesText();
    o.eval_seq_len = 64;
    o.eval_max_windows = 2;
    o.num_calibration_samples = 4;
    o.seq_len = 32;
    o.moe_min_expert_tokens = 4;
    o.output_dir =
        (fs::temp_directory_path() / ("quark_deepseek_pipeline_" + name + std::to_string(::getpid()))).string();
    fs::remove_all(o.output_dir);
    outputs_.push_back(o.output_dir);
    return o;
  }
  static checkpoint::ModelConfig Config() { return checkpoint::LoadModelConfig(*dir_).value(); }

  static std::string* dir_;
  std::vector<std::string> outputs_;
};
std::string* DeepseekPipelineTest::dir_ = nullptr;

TEST_F(DeepseekPipelineTest, TheStreamerComputesTheFamilysForward) {
  const checkpoint::ModelConfig config = Config();
  ASSERT_EQ(config.family, checkpoint::ArchFamily::kDeepseek);
  ASSERT_NE(config.deepseek, nullptr);
  ASSERT_GT(config.deepseek->num_nextn_predict_layers, 0) << "the tiny shape carries an MTP layer";
  auto streamer = runtime::LayerStreamer::Open(*dir_);
  ASSERT_TRUE(streamer.ok()) << streamer.status();
  const at::Tensor ids = at::arange(5, 5 + 40, at::kLong).mul(37).remainder(509).add(3).view({1, 40});
  auto hidden = (*streamer)->Run({ids});
  ASSERT_TRUE(hidden.ok()) << hidden.status();
  auto logits = (*streamer)->model().Logits((*hidden)[0]);
  ASSERT_TRUE(logits.ok()) << logits.status();
  auto reader = checkpoint::CheckpointReader::Open(*dir_);
  ASSERT_TRUE(reader.ok());
  const runtime::CheckpointWeightSource weights(
      std::shared_ptr<const checkpoint::CheckpointReader>(*std::move(reader)));
  auto reference = runtime::DeepseekLogits(*config.deepseek, weights, ids, at::kFloat);
  ASSERT_TRUE(reference.ok()) << reference.status();
  const double diff = (*logits - *reference).abs().max().item<double>();
  EXPECT_LE(diff, 1e-5) << "streamed vs the family's forward";
  EXPECT_GT(reference->abs().max().item<double>(), 1e-3) << "logits that are not all zero";
}

TEST_F(DeepseekPipelineTest, TheMtpLayerAndTheRoutersAreNoModulesOfThePlan) {
  const checkpoint::ModelConfig config = Config();
  auto modules = ListModelModules(*dir_);
  ASSERT_TRUE(modules.ok()) << modules.status();
  const std::string mtp = "model.layers." + std::to_string(config.num_hidden_layers) + ".";
  bool expert = false, q_a = false;
  for (const ModuleInfo& m : *modules) {
    EXPECT_NE(m.name.rfind(mtp, 0), 0u) << m.name;
    EXPECT_FALSE(m.name.size() > 9 && m.name.substr(m.name.size() - 9) == ".mlp.gate") << m.name;
    expert |= m.name == "model.layers.1.mlp.experts.0.gate_proj";
    q_a |= m.name == "model.layers.0.self_attn.q_a_proj";
  }
  EXPECT_TRUE(expert);
  EXPECT_TRUE(q_a);
}

// fp8 (static activations: calibration forwards reach every expert through the top-up) into HF-quark, read back.
TEST_F(DeepseekPipelineTest, Fp8ExportKeepsRoutersAndMtpFloatAndReadsBackToTheFakeQuantizedPerplexity) {
  const checkpoint::ModelConfig config = Config();
  QuantizeModelOptions o = Options("fp8", "fp8");
  auto report = QuantizeModel(*dir_, o);
  ASSERT_TRUE(report.ok()) << report.status();
  const auto& m = report->metrics;
  EXPECT_EQ(m.at("num_layers"), config.num_hidden_layers);
  EXPECT_TRUE(std::isfinite(m.at("ppl_before")));
  EXPECT_NEAR(m.at("ppl_reloaded"), m.at("ppl_after"), 1e-3 * m.at("ppl_after"));
  EXPECT_NE(m.at("ppl_after"), m.at("ppl_before")) << "fp8 changed nothing";
  ASSERT_TRUE(exporter::CheckHfQuarkExport(o.output_dir).ok());
  nlohmann::json config_json;
  std::ifstream(o.output_dir + "/config.json") >> config_json;
  EXPECT_EQ(config_json["model_type"], "deepseek_v3");
  const auto& exclude = config_json["quantization_config"]["exclude"];
  const std::string mtp = "model.layers." + std::to_string(config.num_hidden_layers) + ".";
  for (const std::string& module : {std::string("model.layers.1.mlp.gate"), mtp + "eh_proj", mtp + "self_attn.q_a_proj",
                                    mtp + "mlp.experts.0.down_proj"}) {
    EXPECT_NE(std::find(exclude.begin(), exclude.end(), module), exclude.end()) << module << " in " << exclude.dump();
  }
  auto reader = checkpoint::CheckpointReader::Open(o.output_dir).value();
  EXPECT_EQ(reader->Get("model.layers.1.mlp.gate.weight")->info->dtype, checkpoint::StDType::kF32);
  EXPECT_TRUE(reader->Has("model.layers.1.mlp.gate.e_score_correction_bias"));
  EXPECT_EQ(reader->Get(mtp + "eh_proj.weight")->info->dtype, checkpoint::StDType::kF32);
  EXPECT_FALSE(reader->Has(mtp + "eh_proj.weight_scale"));
  EXPECT_TRUE(reader->Has("model.layers.1.mlp.experts.0.gate_proj.weight_scale"));
  EXPECT_TRUE(reader->Has("model.layers.0.self_attn.kv_b_proj.input_scale"));
}

// uint4 weight-only RTN and the same with GPTQ (DeepSeek's template: DeepseekGptqModules): GPTQ is closer to float.
TEST_F(DeepseekPipelineTest, GptqRunsOnEveryLayerAndBeatsRtn) {
  QuantizeModelOptions rtn = Options("uint4_wo_32", "rtn");
  rtn.output_dir.clear();
  auto rtn_report = QuantizeModel(*dir_, rtn);
  ASSERT_TRUE(rtn_report.ok()) << rtn_report.status();
  QuantizeModelOptions gptq = Options("uint4_wo_32", "gptq");
  gptq.config.algo_config.push_back(GptqAlgo{});
  gptq.calibration_file = runtime::testing::TinyStoriesText();
  gptq.num_calibration_samples = 8;
  auto gptq_report = QuantizeModel(*dir_, gptq);
  ASSERT_TRUE(gptq_report.ok()) << gptq_report.status();
  ASSERT_TRUE(exporter::CheckHfQuarkExport(gptq.output_dir).ok());
  const double before = rtn_report->metrics.at("ppl_before");
  const double rtn_gap = std::abs(rtn_report->metrics.at("ppl_after") - before);
  const double gptq_gap = std::abs(gptq_report->metrics.at("ppl_after") - before);
  EXPECT_LT(gptq_gap, rtn_gap) << "ppl before " << before << ", rtn " << rtn_report->metrics.at("ppl_after")
                               << ", gptq " << gptq_report->metrics.at("ppl_after");
  EXPECT_NEAR(gptq_report->metrics.at("ppl_reloaded"), gptq_report->metrics.at("ppl_after"),
              1e-3 * gptq_report->metrics.at("ppl_after"));
}

TEST_F(DeepseekPipelineTest, ScalingAndRotationAreRefusedByName) {
  QuantizeModelOptions smooth = Options("int8", "smooth");
  smooth.config.algo_config.push_back(SmoothQuantAlgo{});
  auto refused = QuantizeModel(*dir_, smooth);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("algo_config[0]"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("deepseek_v3"));
  QuantizeModelOptions awq = Options("uint4_wo_32", "awq");
  awq.config.algo_config.push_back(AwqAlgo{});
  refused = QuantizeModel(*dir_, awq);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("algo_config[0]"));
  QuantizeModelOptions rotation = Options("uint4_wo_32", "rotation");
  rotation.config.algo_config.push_back(RotationAlgo{});
  refused = QuantizeModel(*dir_, rotation);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("algo_config[0]"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("deepseek_v3"));
}

}  // namespace
}  // namespace quark::quantize
