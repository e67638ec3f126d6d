// #27: the device budget's formula (runtime::StreamerOptions::device_memory_budget with quantize::PassDeviceMemory)
// against the tensor bytes a quantize run really allocates for each layer, measured on the CPU with an
// AllocationMeter (the passes allocate there what they would allocate on a GPU). The formula is checked before a
// layer computes, so it must bound what the layer then holds, and stay close enough to it not to refuse runs that fit.
//
// The model is a bf16 synthetic Llama (the streamer converts each layer to float32 as a device copy would place it),
// hidden 256, intermediate 768, 8 heads over 4 KV heads, samples of 256 tokens: few samples leave the weights and one
// sample's forward to dominate, many the hidden states, as a 7B job with 128 samples does.
#include <cstdio>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

#include <ATen/ATen.h>

#include "core/estimate/job_estimate.h"
#include "core/estimate/model_shape.h"
#include "core/estimate/throughput.h"
#include "core/quantize/layer_memory_profile.h"
#include "core/quantize/quantize_model.h"
#include "core/runtime/allocation_meter.h"
#include "tests/quantize/scenario_run.h"
#include "tests/quantize/test_model.h"

namespace quark {
namespace {

constexpr int64_t kSeq = 256;

struct Case {
  testing::Scenario scenario;
  int samples;
  std::string compute_dtype = "f32";
};

std::string BudgetLlama() {
  testing::SyntheticLlamaOptions o;
  o.hidden = 256;
  o.intermediate = 768;
  o.heads = 8;
  o.kv_heads = 4;
  o.layers = 2;
  o.torch_dtype = "bfloat16";
  return testing::WriteSyntheticLlama(o);
}

// Calibration text long enough for `samples` windows of kSeq tokens.
std::string CalibrationText() { return testing::SmallEvalText(60000); }

class PassMemoryTest : public ::testing::TestWithParam<Case> {};

TEST_P(PassMemoryTest, TheBudgetFormulaBoundsWhatEachLayerHolds) {
  const Case& c = GetParam();
  const std::string model = BudgetLlama();
  QuantizeModelOptions options = testing::ScenarioOptions(c.scenario, CalibrationText(), testing::TempPath("out"), "");
  options.eval_text_file.clear();  // the layers' passes only
  options.num_calibration_samples = c.samples;
  options.seq_len = kSeq;
  options.compute_dtype = c.compute_dtype;
  absl::StatusOr<estimate::ModelShape> shape = estimate::ReadModelShape(model);
  ASSERT_TRUE(shape.ok()) << shape.status();
  const int64_t element = c.compute_dtype == "bf16" ? 2 : 4;
  const int64_t layer_weights = shape->layer_params_total / shape->num_layers * element;  // as placed
  absl::StatusOr<runtime::LayerDeviceMemory> formula = quantize::BudgetFormulaFor(model, options, 0, c.samples, kSeq);
  ASSERT_TRUE(formula.ok()) << formula.status();
  EXPECT_EQ(formula->weights, layer_weights);

  runtime::AllocationMeter meter;
  quantize::LayerMemoryProfile profile(meter);
  profile.Attach(options);
  auto report = QuantizeModel(model, options);
  const std::vector<quantize::LayerMemory> layers = profile.Finish();
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(layers.size(), 2u);
  for (const quantize::LayerMemory& layer : layers) {
    // When the layer's first pass starts, its weights and inputs are alive already: the rise is the rest.
    const int64_t held = layer.peak_above_start + formula->activations / 2 + layer_weights;
    const int64_t need = formula->Need(1);
    std::printf("%s, %d samples, %s, layer %lld: held %.2f MiB, formula %.2f MiB (weights %.2f, activations %.2f, "
                "workspace %.2f, passes %.2f): %.3f\n",
                c.scenario.name.c_str(), c.samples, c.compute_dtype.c_str(), static_cast<long long>(layer.layer), held / 1048576.0,
                need / 1048576.0, formula->weights / 1048576.0, formula->activations / 1048576.0,
                formula->workspace / 1048576.0, formula->passes / 1048576.0, static_cast<double>(held) / need);
    EXPECT_LE(held, need) << "layer " << layer.layer << ": the formula does not bound what the layer holds";
    EXPECT_GE(held, need * 3 / 4) << "layer " << layer.layer << ": the formula asks far more than the layer holds";
  }
  // The estimator's GPU peak for the same job counts at least what the layers held (its calibration phase has no
  // pass term for the quantized copies beyond its second layer copy, which covers them).
  estimate::JobInputs job;
  job.config = options.config;
  job.calibration_samples = c.samples;
  job.calibration_seq_len = kSeq;
  auto estimated = estimate::EstimateJob(*shape, job, estimate::NominalH200Throughput());
  ASSERT_TRUE(estimated.ok()) << estimated.status();
  for (const quantize::LayerMemory& layer : layers) {
    EXPECT_GE(static_cast<int64_t>(estimated->peak_gpu_bytes),
              layer.peak_above_start + formula->activations / 2 + layer_weights)
        << "layer " << layer.layer << ": the estimator's GPU peak is under what the layer held";
  }
}

// The quantizing streamer checks the same formula, the passes' term included, before each layer computes: a budget
// one byte short of it is refused naming the layer and the passes' bytes, before anything is written; the formula's
// own figure passes.
TEST(PassMemoryBudgetTest, TheQuantizingStreamerRefusesABudgetShortOfThePasses) {
  const std::string model = BudgetLlama();
  const testing::Scenario gptq{"uint4_wo_128_gptq", "uint4_wo_128", {GptqAlgo{}}, {"hf_quark"}};
  QuantizeModelOptions options = testing::ScenarioOptions(gptq, CalibrationText(), testing::TempPath("out"), "");
  options.eval_text_file.clear();
  options.num_calibration_samples = 4;
  options.seq_len = kSeq;
  absl::StatusOr<runtime::LayerDeviceMemory> formula = quantize::BudgetFormulaFor(model, options, 0, 4, kSeq);
  ASSERT_TRUE(formula.ok()) << formula.status();
  ASSERT_GT(formula->passes, 0);

  options.device_memory_budget = formula->Need(1) - 1;
  auto refused = QuantizeModel(model, options);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()), ::testing::HasSubstr("layer 0: needs "));
  EXPECT_THAT(std::string(refused.status().message()),
              ::testing::HasSubstr(absl::StrCat(" + passes ", formula->passes, ")")));

  options.output_dir = testing::TempPath("out");
  options.device_memory_budget = formula->Need(1);
  auto fits = QuantizeModel(model, options);
  EXPECT_TRUE(fits.ok()) << fits.status();
}

std::vector<Case> Cases() {
  const testing::Scenario fp8{"fp8", "fp8", {}, {"hf_quark"}};
  const testing::Scenario gptq{"uint4_wo_128_gptq", "uint4_wo_128", {GptqAlgo{}}, {"hf_quark"}};
  // In bf16 the quantized copies take half as much, and GPTQ's float32 Hessians and working weight are the wider term.
  return {{fp8, 4}, {fp8, 32}, {gptq, 4}, {gptq, 32}, {gptq, 4, "bf16"}, {fp8, 32, "bf16"}};
}

INSTANTIATE_TEST_SUITE_P(Runs, PassMemoryTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.scenario.name + "_" + std::to_string(info.param.samples) + "_samples_" +
                                  info.param.compute_dtype;
                         });

}  // namespace
}  // namespace quark
