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
#include "tests/quantize/tiny_pipeline_fixture.h"
#include "tests/runtime/test_paths.h"

namespace quark::quantize {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr char kDeepseekArch[] = "deepseek_v3";
// `quark make-model --arch deepseek_v3 --shape tiny --dtype f32` with stories260K's tokenizer (tiny_pipeline_fixture.h).
class DeepseekPipelineTest : public testing::TinyPipelineTest<kDeepseekArch> {
 protected:
  static checkpoint::ModelConfig Config() { return checkpoint::LoadModelConfig(*dir_).value(); }
};

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
TEST_F(DeepseekPipelineTest, GptqRunsOnEveryLayerAndBeatsRtn) { ExpectGptqBeatsRtn(); }

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
