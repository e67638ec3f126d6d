// Llama 4 text (#32) through the streamed pipeline every family uses: ModelConfig (family kLlama4), TransformerModel
// and the LayerStreamer give the whole-model forward's logits (held to HF's Llama4ForCausalLM in
// tests/runtime/llama4_test); QuantizeModel runs fp8, uint4 RTN and GPTQ on the tiny model (experts as linears, every
// expert calibrated through the top-up, routers float), exports HF-quark (routers copied in float and excluded; vLLM's
// rules with Llama4ConfigProblems pass) and reads it back to the fake-quantized perplexity; SmoothQuant, AWQ and
// rotation are refused naming algo_config[i].
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/model_config.h"
#include "core/config/presets.h"
#include "core/export/hf_quark_checker.h"
#include "core/export/hf_quark_moe_rules.h"
#include "core/quantize/quantize_model.h"
#include "core/runtime/full_model.h"
#include "core/runtime/layer_streamer.h"
#include "core/runtime/synthetic_model.h"
#include "tests/quantize/tiny_pipeline_fixture.h"
#include "tests/runtime/test_paths.h"

namespace quark::quantize {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr char kLlama4Arch[] = "llama4";
// `quark make-model --arch llama4 --shape tiny --dtype f32` with stories260K's tokenizer (tiny_pipeline_fixture.h).
class Llama4PipelineTest : public testing::TinyPipelineTest<kLlama4Arch> {};

TEST_F(Llama4PipelineTest, TheStreamerComputesTheWholeModelsForward) {
  const checkpoint::ModelConfig config = checkpoint::LoadModelConfig(*dir_).value();
  ASSERT_EQ(config.family, checkpoint::ArchFamily::kLlama4);
  ASSERT_NE(config.llama4, nullptr);
  auto streamer = runtime::LayerStreamer::Open(*dir_);
  ASSERT_TRUE(streamer.ok()) << streamer.status();
  // 40 tokens: five chunks of 8 in the chunked layers, temperature tuning past position 3 in the NoPE layer.
  const at::Tensor ids = at::arange(5, 5 + 40, at::kLong).mul(37).remainder(509).add(3).view({1, 40});
  auto hidden = (*streamer)->Run({ids});
  ASSERT_TRUE(hidden.ok()) << hidden.status();
  auto logits = (*streamer)->model().Logits((*hidden)[0]);
  ASSERT_TRUE(logits.ok()) << logits.status();
  auto lm = runtime::CausalLm::Open(*dir_, at::kFloat);
  ASSERT_TRUE(lm.ok()) << lm.status();
  auto reference = (*lm)->Forward(ids);
  ASSERT_TRUE(reference.ok()) << reference.status();
  EXPECT_LE((*logits - *reference).abs().max().item<double>(), 1e-5) << "streamed vs whole";
  EXPECT_GT(reference->abs().max().item<double>(), 1e-3) << "logits that are not all zero";
}

// fp8 (static activations: calibration forwards reach every expert, the top-up the ones the router skipped).
TEST_F(Llama4PipelineTest, Fp8ExportKeepsRoutersFloatAndReadsBackToTheFakeQuantizedPerplexity) {
  QuantizeModelOptions o = Options("fp8", "fp8");
  auto report = QuantizeModel(*dir_, o);
  ASSERT_TRUE(report.ok()) << report.status();
  const auto& m = report->metrics;
  EXPECT_EQ(m.at("num_layers"), 4);
  EXPECT_TRUE(std::isfinite(m.at("ppl_before")));
  EXPECT_NEAR(m.at("ppl_reloaded"), m.at("ppl_after"), 1e-3 * m.at("ppl_after"));
  EXPECT_NE(m.at("ppl_after"), m.at("ppl_before")) << "fp8 changed nothing";
  auto check = exporter::CheckHfQuarkExport(o.output_dir);
  ASSERT_TRUE(check.ok()) << check;
  nlohmann::json config_json;
  std::ifstream(o.output_dir + "/config.json") >> config_json;
  EXPECT_EQ(config_json["model_type"], "llama4_text");
  const auto& exclude = config_json["quantization_config"]["exclude"];
  EXPECT_NE(std::find(exclude.begin(), exclude.end(), "model.layers.1.feed_forward.router"), exclude.end())
      << exclude.dump();
  // vLLM's llama4 rules catch one expert left out of its layer's FusedMoE, and a k_proj apart from qkv_proj.
  nlohmann::ordered_json qc = nlohmann::ordered_json::parse(config_json["quantization_config"].dump());
  qc["exclude"].push_back("model.layers.2.feed_forward.experts.3.down_proj");
  qc["exclude"].push_back("model.layers.0.self_attn.k_proj");
  const auto problems = exporter::Llama4ConfigProblems(qc, *checkpoint::LoadModelConfig(*dir_)->llama4);
  ASSERT_EQ(problems.size(), 2u) << ::testing::PrintToString(problems);
  EXPECT_THAT(problems[0], HasSubstr("model.layers.0.self_attn.k_proj: excluded differently"));
  EXPECT_THAT(problems[1], HasSubstr("model.layers.2.feed_forward.experts.3.down_proj: excluded differently"));
  auto reader = checkpoint::CheckpointReader::Open(o.output_dir).value();
  EXPECT_EQ(reader->Get("model.layers.1.feed_forward.router.weight")->info->dtype, checkpoint::StDType::kF32);
  EXPECT_FALSE(reader->Has("model.layers.1.feed_forward.router.weight_scale"));
  for (int e = 0; e < 4; ++e) {
    EXPECT_TRUE(reader->Has("model.layers.3.feed_forward.experts." + std::to_string(e) + ".down_proj.input_scale")) << e;
  }
  EXPECT_TRUE(reader->Has("model.layers.0.feed_forward.gate_proj.weight_scale"));
  EXPECT_TRUE(reader->Has("model.layers.2.feed_forward.shared_expert.up_proj.weight_scale"));
}

// uint4 weight-only RTN and the same with GPTQ (Llama4GptqModules): GPTQ is closer to float.
TEST_F(Llama4PipelineTest, GptqRunsOnEveryLayerAndBeatsRtn) { ExpectGptqBeatsRtn(); }

TEST_F(Llama4PipelineTest, ScalingAndRotationAreRefusedByName) {
  ExpectScalingAndRotationRefused();
}

}  // namespace
}  // namespace quark::quantize
