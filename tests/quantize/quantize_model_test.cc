// QuantizeModel end to end: clear errors before any work, cancellation, and the fake-quantized evaluation.
#include "core/quantize/quantize_model.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include <gtest/gtest.h>

#include "core/config/presets.h"
#include "tests/quantize/test_model.h"

namespace quark {
namespace {

QuantizeModelOptions SmallRun(const std::string& preset) {
  QuantizeModelOptions o;
  auto config = PresetConfig(preset);
  EXPECT_TRUE(config.ok()) << config.status();
  o.config = *config;
  o.num_calibration_samples = 2;
  o.seq_len = 32;
  o.calibration_file = testing::SmallEvalText();  // static activations need data (no random ids)
  return o;
}

TEST(QuantizeModelTest, GroupSizeThatDoesNotDivideIsAClearError) {
  const std::string stories = testing::FixturePath("stories260K");
  for (const char* preset : {"int4_wo_64", "uint4_wo_128"}) {
    QuantizeModelOptions o = SmallRun(preset);
    o.output_dir = testing::TempPath("quark_out");
    auto report = QuantizeModel(stories, o);
    ASSERT_FALSE(report.ok()) << preset;
    EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(report.status().message()).find("does not divide in_features 172"), std::string::npos)
        << report.status();
    EXPECT_FALSE(std::filesystem::exists(o.output_dir));
  }
}

TEST(QuantizeModelTest, UnpackableShapeIsRefusedBeforeAnyWork) {
  // int4 packs 8 per word: gate_proj's 172 channels' zero points (#30, as Quark packs them), down_proj's 172 columns.
  QuantizeModelOptions o = SmallRun("int4_wo_per_channel");
  o.output_dir = testing::TempPath("quark_out");
  auto report = QuantizeModel(testing::FixturePath("stories260K"), o);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(report.status().message()).find("gate_proj"), std::string::npos) << report.status();
}

TEST(QuantizeModelTest, QuantizedLmHeadIsUnimplementedNotACrash) {
  QuantizeModelOptions o = SmallRun("fp8");
  o.config.exclude.clear();
  auto report = QuantizeModel(testing::WriteSyntheticLlama(), o);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), absl::StatusCode::kUnimplemented) << report.status();
}

TEST(QuantizeModelTest, CancelledBetweenLayers) {
  QuantizeModelOptions o = SmallRun("fp8");
  o.output_dir = testing::TempPath("quark_out");
  int layers_seen = 0;
  o.on_progress = [&](const QuantizeProgress& p) { layers_seen = p.phase == "quantize" ? p.layer : layers_seen; };
  o.cancelled = [&] { return layers_seen >= 1; };
  auto report = QuantizeModel(testing::WriteSyntheticLlama(), o);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), absl::StatusCode::kCancelled);
  EXPECT_FALSE(std::filesystem::exists(o.output_dir));
  EXPECT_FALSE(std::filesystem::exists(o.output_dir + ".partial"));
}

TEST(QuantizeModelTest, StoriesW8A8StaysCloseToFloat) {
  QuantizeModelOptions o = SmallRun("fp8");
  o.eval_text_file = testing::SmallEvalText();
  o.eval_seq_len = 128;
  o.eval_max_windows = 4;
  std::vector<std::string> phases;
  o.on_progress = [&](const QuantizeProgress& p) {
    if (phases.empty() || phases.back() != p.phase) phases.push_back(p.phase);
  };
  auto report = QuantizeModel(testing::FixturePath("stories260K"), o);  // no output_dir: evaluation only
  ASSERT_TRUE(report.ok()) << report.status();
  const double before = report->metrics.at("ppl_before"), after = report->metrics.at("ppl_after");
  EXPECT_GT(before, 1.0);
  EXPECT_LT(std::abs(after - before) / before, 0.05);
  EXPECT_EQ(report->metrics.count("ppl_reloaded"), 0u);
  EXPECT_EQ(phases.front(), "prepare");
  EXPECT_EQ(phases.back(), "done");
}

// #36 item 1: a sweep's first child measures the float perplexity alone (MeasureFloatPerplexity), equal to the
// ppl_before a run measures to the last bit; a run given it skips the float pass (no "evaluate_float" phase), and a run
// asked but given nothing measures it and hands it on.
TEST(QuantizeModelTest, TheFloatPerplexityIsMeasuredAloneOrGivenAsARunMeasuresIt) {
  QuantizeModelOptions o = SmallRun("fp8");
  o.eval_text_file = testing::SmallEvalText();
  o.eval_seq_len = 128;
  o.eval_max_windows = 4;
  const std::string stories = testing::FixturePath("stories260K");
  std::optional<double> handed;
  o.known_float_ppl = [] { return std::nullopt; };
  o.on_float_ppl = [&](double ppl) { handed = ppl; };
  auto measured = QuantizeModel(stories, o);
  ASSERT_TRUE(measured.ok()) << measured.status();
  const double before = measured->metrics.at("ppl_before");
  ASSERT_TRUE(handed.has_value());
  EXPECT_EQ(*handed, before);
  EXPECT_EQ(measured->metrics.count("float_ppl_shared"), 0u);
  absl::StatusOr<double> alone = MeasureFloatPerplexity(stories, o);
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_EQ(*alone, before);

  std::vector<std::string> phases;
  o.on_progress = [&](const QuantizeProgress& p) { phases.push_back(p.phase); };
  o.known_float_ppl = [&] { return std::optional<double>(*alone); };
  o.on_float_ppl = [](double) { ADD_FAILURE() << "a given float perplexity is not measured again"; };
  auto given = QuantizeModel(stories, o);
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_EQ(given->metrics.at("ppl_before"), before);
  EXPECT_EQ(given->metrics.at("float_ppl_shared"), 1);
  EXPECT_EQ(given->metrics.at("ppl_after"), measured->metrics.at("ppl_after"));
  EXPECT_EQ(std::count(phases.begin(), phases.end(), "evaluate_float"), 0);

  QuantizeModelOptions no_text = SmallRun("fp8");
  EXPECT_EQ(MeasureFloatPerplexity(stories, no_text).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace quark
