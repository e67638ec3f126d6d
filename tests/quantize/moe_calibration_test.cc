// MoE calibration coverage (#18): a model whose router never sends a token to expert 3 still calibrates it. Its static
// input scale is set and equals what observing exactly the tokens that ranked it highest gives; without the top-up
// the run fails naming the expert; GPTQ gives every expert a Hessian; QuantizeModel reports the per-expert counts and
// its HF-quark export passes the vLLM rules.
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/model_modules.h"
#include "core/checkpoint/moe_layout.h"
#include "core/config/layer_plan.h"
#include "core/config/presets.h"
#include "core/export/hf_quark_checker.h"
#include "core/quantize/gptq_pass.h"
#include "core/quantize/layer_quantizer.h"
#include "core/quantize/quantize_model.h"
#include "core/runtime/layer_streamer.h"
#include "core/runtime/moe_layer.h"
#include "tests/quantize/test_model.h"
#include "tests/runtime/moe_test_models.h"

namespace quark::quantize {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr int64_t kStarved = 3;
constexpr int64_t kMin = 16;

std::vector<std::vector<int64_t>> SampleIds() {
  std::vector<std::vector<int64_t>> out(2);
  for (int64_t s = 0; s < 2; ++s) {
    for (int64_t i = 0; i < 20; ++i) out[s].push_back((s * 131 + i * 7919 + 13) % 512);
  }
  return out;
}

class MoeCalibrationTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    config_ = runtime::testing::TinyMoeConfig(GetParam());
    dir_ = testing::TempPath("quark_moe_calib_" + GetParam());
    ASSERT_TRUE(runtime::testing::WriteMoeModel(config_, dir_, 7, runtime::testing::StarveExpert(config_, kStarved)).ok());
    auto streamer = runtime::LayerStreamer::Open(dir_);
    ASSERT_TRUE(streamer.ok()) << streamer.status();
    streamer_ = *std::move(streamer);
  }
  void TearDown() override { fs::remove_all(dir_); }

  LayerQuantizer Quantizer(const std::string& preset) {
    auto config = PresetConfig(preset);
    EXPECT_TRUE(config.ok()) << config.status();
    auto modules = ListModelModules(dir_);
    EXPECT_TRUE(modules.ok()) << modules.status();
    return LayerQuantizer(*config, BuildLayerPlan(*config, *modules));
  }
  std::shared_ptr<runtime::DecoderLayer> Layer0() { return streamer_->model().LoadLayer(0).value(); }
  std::vector<at::Tensor> Inputs() {
    std::vector<at::Tensor> out;
    for (const auto& ids : SampleIds()) out.push_back(streamer_->model().Embed(at::tensor(ids, at::kLong).unsqueeze(0)).value());
    return out;
  }
  std::string Expert(int64_t e) const { return checkpoint::MoeExpertName(config_, e); }
  std::string GateOf(int64_t e) const { return Expert(e) + "." + checkpoint::MoeExpertProjections(config_).gate; }

  checkpoint::ModelConfig config_;
  std::string dir_;
  std::unique_ptr<runtime::LayerStreamer> streamer_;
};

TEST_P(MoeCalibrationTest, StarvedExpertsStaticScaleIsThatOfItsTopRankedTokens) {
  LayerQuantizer quantizer = Quantizer("fp8");
  quantizer.set_min_expert_tokens(kMin);
  auto layer = Layer0();
  std::vector<runtime::ExpertCoverage> coverage;
  auto linears = quantizer.Calibrate(*layer, Inputs(), streamer_->model(), nullptr, &coverage);
  ASSERT_TRUE(linears.ok()) << linears.status();
  ASSERT_EQ(coverage.size(), 1u);
  EXPECT_EQ(coverage[0].routed[kStarved], 0);
  EXPECT_EQ(coverage[0].topped_up[kStarved], kMin);
  for (int64_t e = 0; e < config_.num_experts; ++e) {
    if (e != kStarved) EXPECT_GT(coverage[0].routed[e], 0) << "expert " << e << " (only expert 3 is meant to starve)";
  }
  auto calibrated = std::dynamic_pointer_cast<QuantLinear>(layer->FindLinear(GateOf(kStarved)));
  ASSERT_NE(calibrated, nullptr);
  ASSERT_NE(calibrated->input_quantizer()->params(), nullptr);
  const at::Tensor scale = calibrated->input_quantizer()->params()->scale;

  // The tokens that ranked expert 3 highest, by the float64 reference's router over both samples...
  std::vector<at::Tensor> probs;
  for (const auto& ids : SampleIds()) {
    at::Tensor input, p;
    runtime::testing::MoeReferenceRouting(dir_, ids, 0, &input, &p);
    probs.push_back(p);
  }
  const at::Tensor ranking = runtime::testing::MoeExpertRanking(at::cat(probs), kStarved);
  const at::Tensor best = ranking.narrow(0, 0, kMin);
  // ...as the runtime computes the block's input, observed alone by a fresh quantizer of the same linear.
  auto fresh = std::dynamic_pointer_cast<runtime::MoeDecoderLayer>(Layer0());
  ASSERT_NE(fresh, nullptr);
  std::vector<at::Tensor> block_inputs;
  for (const at::Tensor& x : Inputs()) {
    const at::Tensor h = x + fresh->self_attn->forward(fresh->input_layernorm->forward(x), streamer_->model().Context(x.size(1)));
    block_inputs.push_back(fresh->post_attention_layernorm->forward(h).squeeze(0));
  }
  auto installed = quantizer.Install(*fresh);
  ASSERT_TRUE(installed.ok()) << installed.status();
  auto observer = std::dynamic_pointer_cast<QuantLinear>(fresh->FindLinear(GateOf(kStarved)));
  observer->forward(at::cat(block_inputs).index_select(0, best));
  ASSERT_TRUE(observer->Freeze().ok());
  EXPECT_TRUE(at::equal(scale, observer->input_quantizer()->params()->scale))
      << scale << " vs " << observer->input_quantizer()->params()->scale;
  // A different token set gives another scale (the check can fail): the expert's 16 worst-ranked tokens.
  auto other_layer = Layer0();
  ASSERT_TRUE(quantizer.Install(*other_layer).ok());
  auto other = std::dynamic_pointer_cast<QuantLinear>(other_layer->FindLinear(GateOf(kStarved)));
  other->forward(at::cat(block_inputs).index_select(0, ranking.narrow(0, ranking.size(0) - kMin, kMin)));
  ASSERT_TRUE(other->Freeze().ok());
  EXPECT_FALSE(at::equal(scale, other->input_quantizer()->params()->scale));
}

TEST_P(MoeCalibrationTest, WithoutTheTopUpTheRunFailsNamingTheExpert) {
  LayerQuantizer quantizer = Quantizer("fp8");
  quantizer.set_min_expert_tokens(0);
  auto layer = Layer0();
  auto linears = quantizer.Calibrate(*layer, Inputs(), streamer_->model());
  ASSERT_FALSE(linears.ok());
  EXPECT_EQ(linears.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(linears.status().message()), HasSubstr("model.layers.0." + Expert(kStarved) + ": no calibration tokens"));
}

TEST_P(MoeCalibrationTest, GptqGivesEveryExpertAHessian) {
  auto config = PresetConfig("uint4_wo_32");
  ASSERT_TRUE(config.ok()) << config.status();
  auto modules = ListModelModules(dir_);
  ASSERT_TRUE(modules.ok()) << modules.status();
  const LayerPlan plan = BuildLayerPlan(*config, *modules);
  const GptqAlgo algo = ResolveGptqDefaults(GptqAlgo{}, config_);
  for (int64_t min_tokens : {kMin, int64_t{0}}) {
    auto pass = GptqPass::Create(algo, plan, config_, "algo_config[0]");
    ASSERT_TRUE(pass.ok()) << pass.status();
    (*pass)->set_min_expert_tokens(min_tokens);
    auto layer = Layer0();
    std::vector<runtime::ExpertCoverage> coverage;
    algorithms::GptqLayerCallbacks callbacks;
    callbacks.on_coverage = [&](const std::vector<runtime::ExpertCoverage>& c) { coverage = c; };
    auto params = (*pass)->Run(*layer, Inputs(), streamer_->model(), callbacks);
    if (min_tokens == 0) {
      ASSERT_FALSE(params.ok());
      EXPECT_THAT(std::string(params.status().message()),
                  HasSubstr("model.layers.0." + Expert(kStarved) + ": no calibration tokens"));
      continue;
    }
    ASSERT_TRUE(params.ok()) << params.status();
    for (int64_t e = 0; e < config_.num_experts; ++e) {
      EXPECT_EQ(params->count("model.layers.0." + GateOf(e)), 1u) << e;
    }
    ASSERT_EQ(coverage.size(), 1u);
    EXPECT_EQ(coverage[0].topped_up[kStarved], kMin);
  }
}

// AWQ's MoE pairs (each expert's up -> down) record every expert's inputs, the starved one's from its top-up.
TEST_P(MoeCalibrationTest, AwqScalesEveryExpertIncludingTheStarvedOne) {
  QuantizeModelOptions o;
  o.config = PresetConfig("uint4_wo_32").value();
  o.config.algo_config.push_back(AwqAlgo{});
  o.calibration_file = testing::TempPath("quark_moe_awq_ids") + ".ids";
  {
    std::ofstream out(o.calibration_file);
    for (const auto& sample : SampleIds()) {
      for (size_t i = 0; i < sample.size(); ++i) out << (i ? " " : "") << sample[i];
      out << "\n";
    }
  }
  o.num_calibration_samples = 2;
  o.seq_len = 20;
  o.moe_min_expert_tokens = kMin;
  auto report = QuantizeModel(dir_, o);
  ASSERT_TRUE(report.ok()) << report.status();
  const std::string pair = Expert(kStarved) + "." + checkpoint::MoeExpertProjections(config_).up + " -> ";
  int scaled = 0;
  for (const auto& line : report->algorithm_log) scaled += line.find(pair) != std::string::npos;
  EXPECT_EQ(scaled, config_.num_hidden_layers) << "expert 3's up -> down pair in every layer";
  o.moe_min_expert_tokens = 0;
  auto refused = QuantizeModel(dir_, o);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr(Expert(kStarved) + "."));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("no calibration tokens"));
  fs::remove(o.calibration_file);
}

TEST_P(MoeCalibrationTest, QuantizeModelReportsTheCountsAndTheExportPassesTheVllmRules) {
  QuantizeModelOptions o;
  o.config = PresetConfig("fp8").value();
  const std::string ids = testing::TempPath("quark_moe_ids") + ".ids";
  {
    std::ofstream out(ids);
    for (const auto& sample : SampleIds()) {
      for (size_t i = 0; i < sample.size(); ++i) out << (i ? " " : "") << sample[i];
      out << "\n";
    }
  }
  o.calibration_file = ids;
  o.num_calibration_samples = 2;
  o.seq_len = 20;
  o.moe_min_expert_tokens = kMin;
  o.output_dir = testing::TempPath("quark_moe_out");
  auto report = QuantizeModel(dir_, o);
  ASSERT_TRUE(report.ok()) << report.status();
  const auto& m = report->metrics;
  ASSERT_TRUE(m.count("moe.layers.0.routed_min")) << "metrics lack the MoE counts";
  EXPECT_EQ(m.at("moe.layers.0.routed_min"), 0);
  EXPECT_EQ(m.at("moe_routed_min"), 0);
  EXPECT_GE(m.at("moe.layers.0.experts_topped_up"), 1);
  EXPECT_GE(m.at("moe_topup_tokens"), 2 * kMin);  // expert 3 in both layers at least
  // Per expert, under its module name: expert 3 got no routed token and was topped up to the minimum.
  for (int layer = 0; layer < 2; ++layer) {
    const std::string starved = "model.layers." + std::to_string(layer) + "." + Expert(kStarved);
    ASSERT_TRUE(m.count(starved + ".routed_tokens")) << starved;
    EXPECT_EQ(m.at(starved + ".routed_tokens"), 0);
    EXPECT_EQ(m.at(starved + ".topup_tokens"), kMin);
    int64_t routed = 0;
    for (int e = 0; e < config_.num_experts; ++e) {
      routed += static_cast<int64_t>(m.at("model.layers." + std::to_string(layer) + "." + Expert(e) + ".routed_tokens"));
    }
    EXPECT_EQ(routed, 2 * 20 * config_.num_experts_per_tok) << "every routed token counted once per chosen expert";
  }
  bool logged = false;
  for (const auto& line : report->algorithm_log) logged |= line.find("routed tokens per expert") != std::string::npos;
  EXPECT_TRUE(logged);
  // The export passed the vLLM rules when it was published; the routers are float and excluded, expert 3 has its scale.
  ASSERT_TRUE(exporter::CheckHfQuarkExport(o.output_dir).ok());
  nlohmann::json config_json;
  std::ifstream(o.output_dir + "/config.json") >> config_json;
  const std::string router = "model.layers.1." + checkpoint::MoeBlockName(config_) + ".gate";
  const auto& exclude = config_json["quantization_config"]["exclude"];
  EXPECT_NE(std::find(exclude.begin(), exclude.end(), router), exclude.end()) << exclude.dump();
  auto reader = checkpoint::CheckpointReader::Open(o.output_dir).value();
  EXPECT_TRUE(reader->Has("model.layers.1." + GateOf(kStarved) + ".input_scale"));
  EXPECT_EQ(reader->Get(router + ".weight")->info->dtype, checkpoint::StDType::kF32);
  reader.reset();
  // An export whose expert 3 resolves w1 (gate) to another config than w3 (up) and than the other experts is refused,
  // naming the module (vLLM fuses w1/w3 into w13 and runs one scheme per FusedMoE).
  auto& qc = config_json["quantization_config"];
  nlohmann::json other = qc["global_quant_config"];
  other["input_tensors"] = nullptr;
  qc["layer_quant_config"]["*experts.3." + checkpoint::MoeExpertProjections(config_).gate] = other;
  std::ofstream(o.output_dir + "/config.json") << config_json.dump(2);
  const absl::Status broken = exporter::CheckHfQuarkExport(o.output_dir);
  ASSERT_FALSE(broken.ok());
  EXPECT_THAT(std::string(broken.message()), HasSubstr("model.layers.0." + Expert(kStarved) + "." +
                                                       checkpoint::MoeExpertProjections(config_).up +
                                                       ": resolves to a config different from"));
  EXPECT_THAT(std::string(broken.message()), HasSubstr("one scheme for every expert"));
  fs::remove_all(o.output_dir);
  // Without the top-up the job fails naming the expert and publishes nothing.
  o.moe_min_expert_tokens = 0;
  auto refused = QuantizeModel(dir_, o);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr(Expert(kStarved) + ": no calibration tokens"));
  EXPECT_FALSE(fs::exists(o.output_dir));
  fs::remove(ids);
}

// What computes something else for MoE refuses it naming model_type: the R1/R2 rotation and the ONNX export.
TEST_P(MoeCalibrationTest, RotationAndOnnxRefuseNamingTheModelType) {
  QuantizeModelOptions o;
  o.config = PresetConfig("uint4_wo_32").value();
  o.config.algo_config.push_back(RotationAlgo{});
  auto rotated = QuantizeModel(dir_, o);
  ASSERT_FALSE(rotated.ok());
  EXPECT_THAT(std::string(rotated.status().message()), HasSubstr("rotation of " + GetParam()));
  o.config.algo_config.clear();
  o.export_formats = {"onnx"};
  o.output_dir = testing::TempPath("quark_moe_onnx");
  auto onnx = QuantizeModel(dir_, o);
  ASSERT_FALSE(onnx.ok());
  EXPECT_EQ(onnx.status().code(), absl::StatusCode::kUnimplemented) << onnx.status();
  EXPECT_THAT(std::string(onnx.status().message()), HasSubstr("model_type " + GetParam()));
  EXPECT_FALSE(fs::exists(o.output_dir));
}

INSTANTIATE_TEST_SUITE_P(Archs, MoeCalibrationTest, ::testing::Values("mixtral", "qwen2_moe", "qwen3_moe"));

}  // namespace
}  // namespace quark::quantize
