// The budgeted search end to end on tinyllama-a: the cached table, the recipe within its budget, the verifier
// measuring what the table predicts, and the mixed recipe's HF-quark export passing vLLM's rules.
#include "core/search/auto_quantize.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/config/layer_plan.h"
#include "core/config/quark_json.h"
#include "core/export/ct_checker.h"
#include "core/export/hf_quark_checker.h"
#include "core/quantize/quantize_model.h"
#include "tests/runtime/test_paths.h"

namespace quark::search {
namespace {

namespace fs = std::filesystem;
using runtime::testing::SharedDir;

std::string TinyLlama() { return SharedDir() + "/fixtures/tinyllama-a"; }

class AutoQuantizeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { runtime::testing::InitTestEngine(); }
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("auto_quantize_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    options_.candidates = {"uint4_wo_128", "int8"};
    options_.budget = {BudgetKind::kTargetBits, 4.5, "--target-bits"};
    options_.calibration_file = runtime::testing::TinyStoriesText();
    options_.num_samples = 4;
    options_.seq_len = 64;
    options_.cache_dir = (dir_ / "cache").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  AutoQuantizeOptions options_;
};

TEST_F(AutoQuantizeTest, TheRecipeFitsItsBudgetAndTheTableComesBackFromTheCache) {
  auto first = AutoQuantize(TinyLlama(), options_);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->table_from_cache);
  ASSERT_EQ(first->rounds.size(), 1u);  // a size budget is met by construction: one measurement
  EXPECT_TRUE(first->met);
  const Recipe& r = first->rounds[0].recipe;
  EXPECT_LE(r.bits_per_weight, 4.5);
  EXPECT_GT(r.bits_per_weight, 4.15625);  // some groups got int8
  EXPECT_GT(first->rounds[0].measured.kld, 0);
  auto again = AutoQuantize(TinyLlama(), options_);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->table_from_cache);
  EXPECT_EQ(again->table.key, first->table.key);
  EXPECT_EQ(again->rounds[0].recipe.choice, r.choice);
  EXPECT_EQ(again->rounds[0].measured.kld, first->rounds[0].measured.kld);
  // The Config gives each linear its group's choice.
  const LayerPlan plan = BuildLayerPlan(first->config, [&] {
    std::vector<ModuleInfo> m;
    for (const auto& g : first->space.groups) m.insert(m.end(), g.modules.begin(), g.modules.end());
    return m;
  }());
  auto candidates = ResolveCandidates(options_.candidates, "c");
  for (size_t g = 0; g < first->space.groups.size(); ++g) {
    for (const ModuleInfo& m : first->space.groups[g].modules) {
      EXPECT_EQ(plan.Find(m.name)->config, (*candidates)[r.choice[g]].config) << m.name;
    }
  }
  const auto json = AutoQuantizeJson(*first);
  EXPECT_EQ(json["plan"].size(), 16u);
  EXPECT_TRUE(json["sensitivity"]["from_cache"] == false);
}

TEST_F(AutoQuantizeTest, TheVerifierMeasuresWhatTheTablePredictsForOneGroup) {
  auto samples = AutoCalibrationSamples(TinyLlama(), options_);
  ASSERT_TRUE(samples.ok()) << samples.status();
  auto streamer = runtime::LayerStreamer::Open(TinyLlama());
  ASSERT_TRUE(streamer.ok());
  auto candidates = ResolveCandidates(options_.candidates, "c");
  auto table = MeasureSensitivity(**streamer, *samples, *candidates);
  ASSERT_TRUE(table.ok()) << table.status();
  auto floats = (*streamer)->Run(*samples);
  ASSERT_TRUE(floats.ok());
  auto reference = NextTokenReference::Build(**streamer, *samples, *floats);
  ASSERT_TRUE(reference.ok());
  EXPECT_DOUBLE_EQ(reference->mean_nll(), table->float_nll);
  for (size_t g : {1, 11}) {
    Config one;
    for (const ModuleInfo& m : table->groups[g].modules) one.layer_quant_config.push_back({m.name, (*candidates)[1].config});
    auto measured = MeasureRecipe(**streamer, *samples, one, *reference);
    ASSERT_TRUE(measured.ok()) << measured.status();
    EXPECT_NEAR(measured->kld, table->passes[1].kld[g], 1e-6 * table->passes[1].kld[g]) << table->groups[g].name;
  }
}

TEST_F(AutoQuantizeTest, TheMixedRecipeExportsUnderTheConsumersRules) {
  auto result = AutoQuantize(TinyLlama(), options_);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_FALSE(result->config.layer_quant_config.empty());  // mixed, not uniform
  QuantizeModelOptions q;
  q.config = result->config;
  q.output_dir = (dir_ / "export").string();
  q.export_formats = {"hf_quark", "compressed_tensors"};
  q.calibration_file = options_.calibration_file;
  q.num_calibration_samples = 4;
  q.seq_len = 64;
  auto report = QuantizeModel(TinyLlama(), q);
  ASSERT_TRUE(report.ok()) << report.status();
  const std::string hf = (dir_ / "export" / "hf_quark").string(), ct = (dir_ / "export" / "compressed_tensors").string();
  EXPECT_TRUE(exporter::CheckHfQuarkExport(hf).ok());
  EXPECT_TRUE(exporter::CheckCompressedTensorsExport(ct).ok());
  std::ifstream ct_in(fs::path(ct) / "config.json");
  EXPECT_EQ(nlohmann::json::parse(ct_in)["quantization_config"]["config_groups"].size(), 2u);  // uint4 and int8
  std::ifstream in(fs::path(hf) / "config.json");
  const auto config = nlohmann::ordered_json::parse(in);
  const auto& qc = config["quantization_config"];
  auto model = checkpoint::LoadModelConfig(TinyLlama());
  ASSERT_TRUE(model.ok());
  EXPECT_TRUE(exporter::FusedLayerProblems(qc, *model).empty());
  // Every linear resolves, as vLLM reads it, to its group's scheme: int8 weights where the search put int8.
  const Recipe& r = result->rounds.back().recipe;
  for (size_t g = 0; g < result->space.groups.size(); ++g) {
    const bool int8 = result->space.candidates[r.choice[g]] == "int8";
    for (const ModuleInfo& m : result->space.groups[g].modules) {
      const auto layer = exporter::VllmLayerConfig(qc, m.name);
      EXPECT_EQ(layer["weight"]["dtype"], int8 ? "int8" : "uint4") << m.name;
    }
  }
}

TEST_F(AutoQuantizeTest, BadInputsNameTheirFields) {
  AutoQuantizeOptions o = options_;
  o.candidates = {};
  EXPECT_NE(AutoQuantize(TinyLlama(), o).status().message().find("--candidates"), std::string::npos);
  o = options_;
  o.calibration_file = "";
  EXPECT_NE(AutoQuantize(TinyLlama(), o).status().message().find("calibration_file"), std::string::npos);
  o = options_;
  o.budget = {BudgetKind::kTargetBits, 4.0, "--target-bits"};
  auto low = AutoQuantize(TinyLlama(), o);
  EXPECT_EQ(low.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(low.status().message().find("--target-bits: 4 bits per weight is below 4.15625"), std::string::npos)
      << low.status();
}

}  // namespace
}  // namespace quark::search
