// #35 item 3: the imatrix_mse weight observer wired through the engine (core/quantize/imatrix_mse_pass.h): the
// importance it searches with is each linear's Σx² over the layer's calibration inputs (checked against the GGUF
// importance collector, an independent observation of the same forward), the whole run exports what it evaluated,
// and every place it cannot apply is refused naming the field.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/checkpoint/model_modules.h"
#include "core/config/layer_plan.h"
#include "core/config/presets.h"
#include "core/config/validation.h"
#include "core/export/scale_dtype.h"
#include "core/numerics/fake_quant.h"
#include "core/numerics/imatrix_mse_observer.h"
#include "core/numerics/observer.h"
#include "core/quantize/imatrix_collector.h"
#include "core/quantize/imatrix_mse_pass.h"
#include "core/quantize/quantize_model.h"
#include "core/runtime/layer_streamer.h"
#include "tests/quantize/scenario_run.h"
#include "tests/quantize/test_model.h"

namespace quark {
namespace {

Config ImatrixConfig(const std::string& preset = "uint4_wo_32") {
  Config c = PresetConfig(preset).value();
  c.global_quant_config.weight->observer = ObserverKind::kImatrixMse;
  return c;
}

std::vector<std::string> ErrorPaths(const Config& c) {
  std::vector<std::string> paths;
  for (const ValidationIssue& issue : ValidateConfig(c)) {
    if (issue.severity == ValidationIssue::Severity::kError) paths.push_back(issue.ToString());
  }
  return paths;
}

bool AnyStartsWith(const std::vector<std::string>& lines, const std::string& prefix) {
  for (const auto& line : lines) {
    if (line.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

class ImatrixMsePassTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_dir_ = testing::WriteSyntheticLlama();
    auto streamer = runtime::LayerStreamer::Open(model_dir_);
    ASSERT_TRUE(streamer.ok()) << streamer.status();
    streamer_ = *std::move(streamer);
    at::manual_seed(5);
    for (int i = 0; i < 3; ++i) {
      auto embedded = streamer_->model().Embed(at::randint(0, 512, {1, 17 + 8 * i}, at::kLong));
      ASSERT_TRUE(embedded.ok());
      samples_.push_back(*embedded);
    }
  }

  LayerPlan Plan(const Config& config) const {
    auto modules = ListModelModules(model_dir_);
    EXPECT_TRUE(modules.ok()) << modules.status();
    return BuildLayerPlan(config, *modules);
  }

  std::string model_dir_;
  std::unique_ptr<runtime::LayerStreamer> streamer_;
  std::vector<at::Tensor> samples_;
};

TEST_F(ImatrixMsePassTest, SearchesWithEachLinearsSumOfSquaredInputs) {
  const Config config = ImatrixConfig();
  const quantize::ImatrixMsePass pass(Plan(config));
  auto layer = streamer_->model().LoadLayer(0).value();
  const auto before = layer->NamedLinears();
  auto params = pass.Run(*layer, samples_, streamer_->model());
  ASSERT_TRUE(params.ok()) << params.status();
  ASSERT_EQ(params->size(), 7u);  // q, k, v, o, gate, up, down
  const auto after = layer->NamedLinears();
  for (size_t i = 0; i < before.size(); ++i) EXPECT_EQ(after[i].linear, before[i].linear) << "not restored";

  // The same forward observed by llama-imatrix's collector (float32 sums, GGUF names).
  quantize::ImatrixCollector collector(streamer_->config());
  ASSERT_TRUE(collector.Attach(*layer).ok());
  for (const at::Tensor& x : samples_) layer->forward(x, streamer_->model().Context(x.size(1)));
  ASSERT_TRUE(collector.Detach(*layer).ok());
  int differing = 0;
  for (const runtime::NamedLinear& l : before) {
    const at::Tensor importance = pass.last_importance().at(l.name);
    const auto& entry = collector.stats()->entries.at(collector.GgufSlotOf(l.name + ".weight").name);
    const at::Tensor reference = at::tensor(entry.sum2, at::kFloat).to(at::kDouble);
    EXPECT_TRUE(at::allclose(importance, reference, 1e-5, 0)) << l.name;
    // The parameters are the search with that importance on the spec the QuantLinear uses.
    const QuantSpec spec = exporter::WeightSpecForExport(*config.global_quant_config.weight, at::kFloat);
    const QuantParams expected = ImatrixMseParams(l.linear->weight(), importance, spec).value();
    const QuantParams& got = *params->at(l.name).weight;
    EXPECT_TRUE(at::equal(got.scale, expected.scale)) << l.name;
    EXPECT_TRUE(at::equal(got.zero_point, expected.zero_point)) << l.name;
    QuantSpec minmax_spec = spec;
    minmax_spec.observer = ObserverKind::kMinMax;
    const QuantParams minmax = ParamsOf(l.linear->weight(), minmax_spec, TensorRole::kWeight).value();
    differing += !at::equal(got.scale, minmax.scale);
  }
  EXPECT_GT(differing, 0) << "the search chose MinMax's range everywhere";
}

TEST_F(ImatrixMsePassTest, WithoutSamplesItIsAFailedPrecondition) {
  const quantize::ImatrixMsePass pass(Plan(ImatrixConfig()));
  auto layer = streamer_->model().LoadLayer(0).value();
  auto params = pass.Run(*layer, {}, streamer_->model());
  ASSERT_FALSE(params.ok());
  EXPECT_EQ(params.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(params.status().message()).find("calibration samples"), std::string::npos);
}

TEST(ImatrixMseObserverRefusalTest, WithoutImportanceItRefusesRatherThanFallBack) {
  const QuantSpec spec = *ImatrixConfig().global_quant_config.weight;
  auto observer = MakeObserver(spec, TensorRole::kWeight);
  ASSERT_TRUE(observer.ok()) << observer.status();
  const at::Tensor w = at::randn({8, 64});
  ASSERT_TRUE((*observer)->Observe(w).ok());
  auto params = (*observer)->ComputeParams();
  ASSERT_FALSE(params.ok());
  EXPECT_EQ(params.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(params.status().message()).find("observer: imatrix_mse needs"), std::string::npos);
  // With one, the observer is the search.
  auto* imatrix = dynamic_cast<ImatrixMseObserver*>(observer->get());
  ASSERT_NE(imatrix, nullptr);
  const at::Tensor importance = at::rand({64}).add(0.1);
  imatrix->set_importance(importance);
  const QuantParams expected = ImatrixMseParams(w, importance, spec).value();
  EXPECT_TRUE(at::equal((*observer)->ComputeParams()->scale, expected.scale));
  EXPECT_FALSE((*observer)->Observe(w).ok()) << "a second weight";
}

TEST(ImatrixMseValidationTest, RefusalsNameTheField) {
  Config activation = PresetConfig("int8").value();
  activation.global_quant_config.input_tensors->observer = ObserverKind::kImatrixMse;
  EXPECT_TRUE(AnyStartsWith(ErrorPaths(activation), "global_quant_config.input_tensors.observer: imatrix_mse observes "
                                                    "weights only"));
  Config fp8 = PresetConfig("fp8").value();
  fp8.global_quant_config.weight->observer = ObserverKind::kImatrixMse;
  EXPECT_TRUE(AnyStartsWith(ErrorPaths(fp8), "global_quant_config.weight.observer: imatrix_mse searches integer"));
  Config per_tensor = ImatrixConfig();
  per_tensor.global_quant_config.weight->qscheme = QScheme::kPerTensor;
  per_tensor.global_quant_config.weight->group_size.reset();
  EXPECT_TRUE(AnyStartsWith(ErrorPaths(per_tensor), "global_quant_config.weight.observer: imatrix_mse needs per_channel"));
  for (const AlgoConfig& algo : {AlgoConfig(GptqAlgo{}), AlgoConfig(AwqAlgo{}), AlgoConfig(AutoRoundAlgo{})}) {
    Config with_algo = ImatrixConfig();
    with_algo.algo_config = {algo};
    EXPECT_TRUE(AnyStartsWith(ErrorPaths(with_algo), "algo_config[0]: " + std::string(AlgoName(algo)) +
                                                         " with imatrix_mse weights (global_quant_config.weight.observer)"))
        << AlgoName(algo);
  }
  Config rtn = ImatrixConfig();
  rtn.algo_config = {RotationAlgo{}};
  EXPECT_TRUE(ErrorPaths(rtn).empty());
}

// The whole run: the exports hold what was evaluated, and the imatrix_mse parameters are not MinMax's.
TEST(ImatrixMseRunTest, ExportsReloadToTheEvaluatedModel) {
  const std::string model = testing::WriteSyntheticLlama();
  const std::string text = testing::SmallEvalText();
  const auto run = [&](ObserverKind observer) {
    const testing::Scenario scenario{"imatrix", "uint4_wo_32", {}, {"hf_quark", "compressed_tensors"}, observer};
    const QuantizeModelOptions o = testing::ScenarioOptions(scenario, text, testing::TempPath("imatrix_run"), "");
    auto report = QuantizeModel(model, o);
    EXPECT_TRUE(report.ok()) << report.status();
    return std::make_pair(*report, o.output_dir);
  };
  const auto imatrix_run = run(ObserverKind::kImatrixMse);
  const QuantizeModelReport& imatrix = imatrix_run.first;
  const std::string dir = imatrix_run.second;
  const QuantizeModelReport minmax = run(ObserverKind::kMinMax).first;
  EXPECT_NEAR(imatrix.metrics.at("ppl_reloaded"), imatrix.metrics.at("ppl_after"), 1e-5 * imatrix.metrics.at("ppl_after"));
  // #30 item 2: the compressed-tensors export read back gives the HF-quark read-back's figure.
  EXPECT_EQ(imatrix.metrics.at("ppl_compressed_tensors"), imatrix.metrics.at("ppl_reloaded"));
  EXPECT_NE(imatrix.metrics.at("ppl_after"), minmax.metrics.at("ppl_after"));
  // compressed-tensors names llm-compressor's observer; the HF-quark config a class Quark's loaders import.
  const auto config = [&](const char* format) {
    std::ifstream in(dir + "/" + format + "/config.json");
    return nlohmann::json::parse(in)["quantization_config"];
  };
  EXPECT_EQ(config("compressed_tensors")["config_groups"]["group_0"]["weights"]["observer"], "imatrix_mse");
  EXPECT_EQ(config("hf_quark")["global_quant_config"]["weight"]["observer_cls"], "PerGroupMinMaxObserver");
}

}  // namespace
}  // namespace quark
