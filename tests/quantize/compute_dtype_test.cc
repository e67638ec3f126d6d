// QuantizeModelOptions::compute_dtype "bf16" (a GPU's fast path), run here on the CPU on tinyllama-a (trained: its
// perplexities mean something, unlike a random model's): every
// algorithm runs with bf16 activations end to end (calibration, GPTQ's Hessians, the scaling searches, the
// evaluations, the read-back), its exports read back to the perplexity the run reports, and that perplexity stays
// within 1% of the float32 run's (bf16 activations move the calibrated parameters by their rounding, not more). The
// compute dtype is part of the checkpoint fingerprint (a bf16 run never resumes a float32 one), and a dtype that is
// neither is refused naming the field.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "core/quantize/quantize_model.h"
#include "tests/quantize/scenario_run.h"
#include "tests/quantize/test_model.h"

namespace quark {
namespace {

using testing::Scenario;

class ComputeDtypeTest : public ::testing::TestWithParam<Scenario> {
 protected:
  static void SetUpTestSuite() { text_ = new std::string(testing::SmallEvalText(24000)); }
  static std::string* text_;
};
std::string* ComputeDtypeTest::text_ = nullptr;

std::string TinyLlama() { return testing::FixturePath("tinyllama-a"); }

// 16 calibration samples of 128 tokens, 8 evaluation windows of 128.
QuantizeModelOptions Options(const Scenario& scenario, const std::string& text, const std::string& compute_dtype) {
  QuantizeModelOptions o = testing::ScenarioOptions(scenario, text, testing::TempPath("out"), "");
  o.num_calibration_samples = 16;
  o.seq_len = 128;
  o.eval_seq_len = 128;
  o.eval_max_windows = 8;
  o.compute_dtype = compute_dtype;
  return o;
}

TEST_P(ComputeDtypeTest, Bf16RunsEveryPassWithinTheFloatRunsPerplexity) {
  auto a = QuantizeModel(TinyLlama(), Options(GetParam(), *text_, "f32"));
  auto b = QuantizeModel(TinyLlama(), Options(GetParam(), *text_, "bf16"));
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  for (const char* metric : {"ppl_before", "ppl_after", "ppl_reloaded"}) {
    ASSERT_TRUE(a->metrics.count(metric) && b->metrics.count(metric)) << metric;
    const double x = a->metrics.at(metric), y = b->metrics.at(metric);
    EXPECT_TRUE(std::isfinite(y)) << metric;
    EXPECT_LE(std::abs(y - x) / x, 0.01) << metric << ": f32 " << x << ", bf16 " << y;
  }
  // The float model itself computes differently in bf16 (a run that ignored the option would give the same bits).
  EXPECT_NE(a->metrics.at("ppl_before"), b->metrics.at("ppl_before"));
  // Its own export read back: what the fake-quantized evaluation saw is what was written.
  EXPECT_LE(std::abs(b->metrics.at("ppl_reloaded") - b->metrics.at("ppl_after")) / b->metrics.at("ppl_after"), 0.01);
  std::printf("%s: ppl_before f32 %.5f bf16 %.5f; ppl_reloaded f32 %.5f bf16 %.5f\n", GetParam().name.c_str(),
              a->metrics.at("ppl_before"), b->metrics.at("ppl_before"), a->metrics.at("ppl_reloaded"),
              b->metrics.at("ppl_reloaded"));
}

INSTANTIATE_TEST_SUITE_P(Algorithms, ComputeDtypeTest,
                         ::testing::Values(Scenario{"rtn_weight_only", "uint4_wo_128", {}, {}},
                                           Scenario{"fp8", "fp8", {}, {}},
                                           Scenario{"gptq", "uint4_wo_128", {GptqAlgo{}}, {}},
                                           Scenario{"smoothquant", "int8", {SmoothQuantAlgo{}}, {}},
                                           Scenario{"awq", "uint4_wo_128", {AwqAlgo{}}, {}},
                                           Scenario{"rotation", "int4_wo_128", {RotationAlgo{}}, {}}),
                         [](const ::testing::TestParamInfo<Scenario>& info) { return info.param.name; });

TEST(ComputeDtypeRefusalTest, AnUnknownDtypeIsRefusedNamingTheField) {
  testing::SyntheticLlamaOptions model;
  model.layers = 1;
  const std::string dir = testing::WriteSyntheticLlama(model);
  QuantizeModelOptions options =
      testing::ScenarioOptions(Scenario{"rtn", "uint4_wo_128", {}, {}}, testing::SmallEvalText(), "", "");
  options.compute_dtype = "fp16";
  auto report = QuantizeModel(dir, options);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(report.status().message()).find("compute_dtype"), std::string::npos) << report.status();
}

TEST(ComputeDtypeRefusalTest, ACheckpointOfAFloatRunIsNotResumedInBf16) {
  const std::string dir = testing::WriteSyntheticLlama(testing::Group128Llama());
  const std::string text = testing::SmallEvalText();
  const std::string checkpoint = testing::TempPath("checkpoint");
  const Scenario gptq{"gptq", "uint4_wo_128", {GptqAlgo{}}, {}};
  const std::string out = testing::TempPath("out");  // the same output: only the compute dtype differs
  auto first = QuantizeModel(dir, testing::ScenarioOptions(gptq, text, out, checkpoint));
  ASSERT_TRUE(first.ok()) << first.status();
  auto same = QuantizeModel(dir, testing::ScenarioOptions(gptq, text, out, checkpoint));
  ASSERT_TRUE(same.ok()) << same.status();
  ASSERT_EQ(same->metrics.count("resumed_at_layer"), 1u) << "the same float32 run resumes (the test's premise)";
  std::filesystem::remove_all(out);  // as a caller starting afresh would: only the checkpoint is left
  QuantizeModelOptions again = testing::ScenarioOptions(gptq, text, out, checkpoint);
  again.compute_dtype = "bf16";
  std::vector<std::string> notices;
  again.on_notice = [&](const std::string& line) { notices.push_back(line); };
  auto second = QuantizeModel(dir, again);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->metrics.count("resumed_at_layer"), 0u) << "a bf16 run resumed a float32 run's checkpoint";
  bool discarded = false;
  for (const std::string& line : notices) discarded = discarded || line.find("discarded") != std::string::npos;
  EXPECT_TRUE(discarded) << "no notice said the float32 checkpoint was discarded";
}

}  // namespace
}  // namespace quark
