// #27: the device budget's formula (runtime::StreamerOptions::device_memory_budget with quantize::PassDeviceMemory)
// against the tensor bytes a quantize run really allocates for each layer, measured on the CPU with an
// AllocationMeter (the passes allocate there what they would allocate on a GPU). The formula is checked before a
// layer computes, so it must bound what the layer then holds, and stay close enough to it not to refuse runs that fit.
//
// The model is a bf16 synthetic Llama (the streamer converts each layer to float32 as a device copy would place it),
// hidden 256, intermediate 768, 8 heads over 4 KV heads, samples of 256 tokens: few samples leave the weights and one
// sample's forward to dominate, many the hidden states, as a 7B job with 128 samples does.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

#include <ATen/ATen.h>

#include "core/estimate/job_estimate.h"
#include "core/estimate/model_shape.h"
#include "core/estimate/throughput.h"
#include "core/algorithms/gptq.h"
#include "core/config/layer_plan.h"
#include "core/config/presets.h"
#include "core/quantize/layer_memory_profile.h"
#include "core/quantize/pass_memory.h"
#include "core/runtime/layer_streamer.h"
#include "core/quantize/quantize_model.h"
#include "core/runtime/allocation_meter.h"
#include "tests/quantize/scenario_run.h"
#include "tests/runtime/moe_test_models.h"
#include "tests/quantize/test_model.h"
#include "tests/quantize/tiny_family_model.h"

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

// A quantize run under an AllocationMeter: what each layer's passes allocated above what was alive at its start.
struct ProfiledRun {
  absl::StatusOr<QuantizeModelReport> report;
  std::vector<quantize::LayerMemory> layers;
};

ProfiledRun RunProfiled(const std::string& model, QuantizeModelOptions options) {
  runtime::AllocationMeter meter;
  quantize::LayerMemoryProfile profile(meter);
  profile.Attach(options);
  ProfiledRun run{QuantizeModel(model, options), {}};
  run.layers = profile.Finish();
  return run;
}

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

  const ProfiledRun run = RunProfiled(model, options);
  const absl::StatusOr<QuantizeModelReport>& report = run.report;
  const std::vector<quantize::LayerMemory>& layers = run.layers;
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(layers.size(), 2u);
  const checkpoint::TokenPasses token_passes =
      quantize::PassMemoryOptionsFor(options.config, at::kFloat, at::kCPU, 0).token_passes;
  for (const quantize::LayerMemory& layer : layers) {
    // When the layer's first pass starts, its weights and inputs are alive already: the rise is the rest. After layer
    // 0 the float stream's inputs (the float model's hidden states, beside the quantized model's) are alive too.
    const int64_t float_inputs = token_passes.float_stream && layer.layer > 0 ? formula->activations / 2 : 0;
    const int64_t held = layer.peak_above_start + formula->activations / 2 + layer_weights + float_inputs;
    const int64_t need = formula->Need(1);
    std::printf("%s, %d samples, %s, layer %lld: held %.2f MiB, formula %.2f MiB (weights %.2f, activations %.2f, "
                "workspace %.2f, passes %.2f of which per token %.2f): %.3f\n",
                c.scenario.name.c_str(), c.samples, c.compute_dtype.c_str(), static_cast<long long>(layer.layer), held / 1048576.0,
                need / 1048576.0, formula->weights / 1048576.0, formula->activations / 1048576.0,
                formula->workspace / 1048576.0, formula->Passes() / 1048576.0,
                (formula->Passes() - formula->passes) / 1048576.0, static_cast<double>(held) / need);
    EXPECT_LE(held, need) << "layer " << layer.layer << ": the formula does not bound what the layer holds";
    // The scaling searches' per-token copies are counted at the widest any of their steps could hold them together;
    // what a layer held reached 73-86% of it here (SmoothQuant's layer 1 the least), so the bound is a half for them.
    const bool per_token = formula->bytes_per_token > 0;
    EXPECT_GE(held, per_token ? need / 2 : need * 3 / 4)
        << "layer " << layer.layer << ": the formula asks far more than the layer holds";
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

// GPTQ of routed experts streamed in groups records, for each MoE layer, the routed block's input of every token and
// one group's calls to its experts (algorithms/gptq_layer.cc): the formula's per-token term
// (checkpoint::TokenPasses::gptq_expert_group) must bound them. The tiny qwen3_moe (hidden 64, 8 experts, top-2) with
// 32 samples of 128 tokens, groups of 2: without that term a layer held 1.8x the formula.
TEST(PassMemoryMoeTest, GptqOfExpertsInGroupsHoldsWithinTheFormula) {
  const std::string model = testing::TempPath("tiny_qwen3_moe");
  ASSERT_TRUE(testing::MakeTinyFamilyModel("qwen3_moe", model).ok());
  constexpr int kSamples = 32, kMoeSeq = 128;
  QuantizeModelOptions options;
  options.config = *PresetConfig("uint4_wo_32");
  options.config.algo_config = {GptqAlgo{}};
  options.expert_group_size = 2;
  options.calibration_file = CalibrationText();
  options.num_calibration_samples = kSamples;
  options.seq_len = kMoeSeq;
  options.moe_min_expert_tokens = 4;
  options.output_dir = testing::TempPath("out");
  absl::StatusOr<runtime::LayerDeviceMemory> formula = quantize::BudgetFormulaFor(model, options, 0, kSamples, kMoeSeq);
  ASSERT_TRUE(formula.ok()) << formula.status();
  ASSERT_GT(formula->bytes_per_token, 0);

  const ProfiledRun run = RunProfiled(model, options);
  const absl::StatusOr<QuantizeModelReport>& report = run.report;
  const std::vector<quantize::LayerMemory>& layers = run.layers;
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(layers.size(), 2u);
  // The streamer places the layer without its routed experts, which load a group at a time (the passes' term counts
  // a group's copies); the model is float32, as the run computes.
  auto shape = estimate::ReadModelShape(model);
  ASSERT_TRUE(shape.ok()) << shape.status();
  int64_t placed_weights = 0;
  for (const estimate::TensorShape& t : shape->tensors) {
    if (t.layer == 0 && t.name.find(".experts.") == std::string::npos) placed_weights += static_cast<int64_t>(t.bytes);
  }
  const int64_t need = placed_weights + formula->activations + formula->workspace + formula->Passes();
  for (const quantize::LayerMemory& layer : layers) {
    const int64_t held = layer.peak_above_start + formula->activations / 2 + placed_weights;
    std::printf("qwen3_moe, GPTQ, experts in groups of 2, layer %lld: held %.2f MiB, formula %.2f MiB (per token "
                "%.2f): %.3f\n",
                static_cast<long long>(layer.layer), held / 1048576.0, need / 1048576.0,
                (formula->Passes() - formula->passes) / 1048576.0, static_cast<double>(held) / need);
    EXPECT_LE(held, need) << "layer " << layer.layer << ": the formula does not bound what the layer holds";
    EXPECT_GE(held, need / 2) << "layer " << layer.layer << ": the formula asks far more than the layer holds";
  }
  // The estimator's GPU peak for the job counts at least what the layers held.
  estimate::JobInputs job;
  job.config = options.config;
  job.calibration_samples = kSamples;
  job.calibration_seq_len = kMoeSeq;
  job.expert_group_size = 2;
  auto estimated = estimate::EstimateJob(*shape, job, estimate::NominalH200Throughput());
  ASSERT_TRUE(estimated.ok()) << estimated.status();
  std::printf("the estimator's GPU peak: %.2f MiB\n", estimated->peak_gpu_bytes / 1048576.0);
  for (const quantize::LayerMemory& layer : layers) {
    EXPECT_GE(static_cast<int64_t>(estimated->peak_gpu_bytes),
              layer.peak_above_start + formula->activations / 2 + placed_weights)
        << "layer " << layer.layer << ": the estimator's GPU peak is under what the layer held";
  }
  std::filesystem::remove_all(model);
}

// PassDeviceMemory's terms on one layer, in closed form from the shapes.
absl::StatusOr<std::shared_ptr<runtime::DecoderLayer>> FirstLayer(const std::string& model) {
  auto streamer = runtime::LayerStreamer::Open(model);
  if (!streamer.ok()) return streamer.status();
  return (*streamer)->model().LoadLayer(0);
}

TEST(PassDeviceMemoryTest, DenseCopiesGptqOnTheCpuAndInTensorOperationsAndTheClipSearch) {
  const std::string model = BudgetLlama();
  auto shape = estimate::ReadModelShape(model);
  ASSERT_TRUE(shape.ok()) << shape.status();
  auto layer = FirstLayer(model);
  ASSERT_TRUE(layer.ok()) << layer.status();
  const LayerPlan plan = BuildLayerPlan(*PresetConfig("uint4_wo_128"), shape->modules);
  // q, o 256 x 256; k, v 128 x 256; gate, up 768 x 256; down 256 x 768; a scale and a zero point per 128 columns.
  const int64_t weights = 256 * 256 * 2 + 128 * 256 * 2 + 768 * 256 * 3;
  const int64_t params = (256 * 2 + 128 * 2 + 768 * 2) * 2 * 8 + 256 * 6 * 8;
  quantize::PassMemoryOptions options;
  EXPECT_EQ(quantize::PassDeviceMemory(**layer, plan, options), weights * 4 + params);
  options.element_bytes = 2;
  EXPECT_EQ(quantize::PassDeviceMemory(**layer, plan, options), weights * 2 + params);
  // GPTQ on the CPU: down_proj's 768^2 Hessian and the widest float32 weight (768 x 256), under the copies in float32;
  // in tensor operations kTensorOpsHessianCopies such Hessians and kTensorOpsWeightCopies weight copies, over them.
  options.element_bytes = 4;
  options.gptq = true;
  EXPECT_EQ(quantize::PassDeviceMemory(**layer, plan, options), weights * 4 + params);
  options.element_bytes = 2;
  EXPECT_EQ(quantize::PassDeviceMemory(**layer, plan, options), std::max<int64_t>(weights * 2 + params, 768 * 768 * 4 + 768 * 256 * 4));
  options.tensor_ops = true;
  EXPECT_EQ(quantize::PassDeviceMemory(**layer, plan, options),
            quantize::kTensorOpsHessianCopies * 768 * 768 * 4 + quantize::kTensorOpsWeightCopies * 768 * 256 * 4);
  // AWQ's clip search beside the copies: down_proj's float and clipped outputs (the widest it clips: 6 groups of 128
  // columns, a block of 256 rows) over the tokens it samples of the calibration's (Quark's stride T // 512: 2,048 ->
  // 512, 1,500 -> 750, 700 -> 700; unknown: the most, 1,023).
  quantize::PassMemoryOptions awq;
  awq.token_passes.awq = true;
  for (const auto& [tokens, sampled] : {std::pair<int64_t, int64_t>{2048, 512}, {1500, 750}, {700, 700}, {0, 1023}}) {
    const int64_t clip = quantize::PassDeviceMemory(**layer, plan, awq, tokens) - (weights * 4 + params);
    EXPECT_EQ(clip, 2 * 6 * sampled * 256 * 4) << tokens;
  }
}

// Routed experts: GPTQ's step of one projection holds every expert's Hessian; streamed in groups of G, one expert's,
// and only G experts' quantized copies are resident.
TEST(PassDeviceMemoryTest, RoutedExpertsWholeAndStreamedInGroups) {
  const checkpoint::ModelConfig config = runtime::testing::TinyMoeConfig("qwen3_moe");
  const std::string model = testing::TempPath("moe");
  ASSERT_TRUE(runtime::testing::WriteMoeModel(config, model, 1).ok());
  auto shape = estimate::ReadModelShape(model);
  ASSERT_TRUE(shape.ok()) << shape.status();
  auto layer = FirstLayer(model);
  ASSERT_TRUE(layer.ok()) << layer.status();
  const LayerPlan plan = BuildLayerPlan(*PresetConfig("fp8"), shape->modules);
  const int64_t experts = config.num_experts, width = config.moe_intermediate_size, hidden = config.hidden_size;
  ASSERT_GT(experts, 2);
  const int64_t expert_copy = 3 * width * hidden * 4 + 3 * 8;  // gate, up, down in float32, one fp8 scale pair each
  quantize::PassMemoryOptions whole, grouped;
  grouped.expert_group_size = 2;
  const int64_t all = quantize::PassDeviceMemory(**layer, plan, whole);
  EXPECT_EQ(all - quantize::PassDeviceMemory(**layer, plan, grouped), (experts - 2) * expert_copy);
  // GPTQ's widest step: every expert's input to down_proj (width^2 each) or to gate/up (hidden^2 each, one input an
  // expert), against one expert's when streamed.
  whole.gptq = grouped.gptq = true;
  whole.element_bytes = grouped.element_bytes = 0;  // the Hessians alone (and the widest weight)
  const int64_t widest = std::max(width, hidden);
  const int64_t largest_weight = width * hidden * 4;
  EXPECT_GE(quantize::PassDeviceMemory(**layer, plan, whole), experts * widest * widest * 4 + largest_weight);
  EXPECT_LT(quantize::PassDeviceMemory(**layer, plan, grouped), experts * widest * widest * 4);
}

// GPTQ's tensor-operation path (every device's but the CPU's) run on the CPU under the meter: the factorisation holds
// kTensorOpsHessianCopies K x K matrices; quantizing a weight holds kTensorOpsWeightCopies float32 copies of it and a
// row-major copy of the (column-major) factor for the fused blocks. PassDeviceMemory charges a device the Hessians and
// the weight copies together, which bounds both. Both a float32 and a bfloat16 weight (the compute dtypes); the slack
// is the per-block buffers and the group parameters.
TEST(PassDeviceMemoryTest, GptqInTensorOperationsHoldsWhatTheDeviceTermCharges) {
  constexpr int64_t n = 256, k = 768;
  const int64_t hessian_bytes = k * k * 4, weight_bytes = n * k * 4, slack = 4 * n * 128 * 4;
  const int64_t charged =
      quantize::kTensorOpsHessianCopies * hessian_bytes + quantize::kTensorOpsWeightCopies * weight_bytes;
  at::manual_seed(0);
  const at::Tensor x = at::randn({2048, k});
  const QuantSpec spec = *PresetConfig("uint4_wo_128")->global_quant_config.weight;
  algorithms::GptqOptions options;
  options.tensor_ops = true;
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    SCOPED_TRACE(c10::toString(dtype));
    const at::Tensor weight = (at::randn({n, k}) * 0.02).to(dtype);
    runtime::AllocationMeter meter;
    at::Tensor hessian = x.t().matmul(x);
    meter.ResetPeak();
    const int64_t start = meter.live_bytes();  // the Hessian is alive: the factorisation's own copies come on top
    auto factor = algorithms::GptqFactorOf(std::move(hessian), options);
    ASSERT_TRUE(factor.ok()) << factor.status();
    const int64_t factoring = meter.peak_bytes() - start + hessian_bytes;
    meter.ResetPeak();
    const int64_t before = meter.live_bytes();  // the factor is alive
    auto result = algorithms::GptqQuantizeWeight(weight, *factor, spec, options);
    ASSERT_TRUE(result.ok()) << result.status();
    const int64_t quantizing = meter.peak_bytes() - before;
    std::printf("%s: factorisation %.2f Hessians; column quantization %.2f weights above the factor (%.2f with the "
                "factor's row-major copy taken out)\n",
                c10::toString(dtype), static_cast<double>(factoring) / hessian_bytes,
                static_cast<double>(quantizing) / weight_bytes,
                static_cast<double>(quantizing - hessian_bytes) / weight_bytes);
    EXPECT_LE(factoring, quantize::kTensorOpsHessianCopies * hessian_bytes + slack);
    EXPECT_GT(factoring, (quantize::kTensorOpsHessianCopies - 1) * hessian_bytes);
    EXPECT_LE(quantizing - hessian_bytes, quantize::kTensorOpsWeightCopies * weight_bytes + slack);
    EXPECT_GT(quantizing - hessian_bytes, (quantize::kTensorOpsWeightCopies - 1) * weight_bytes);
    EXPECT_LE(hessian_bytes + quantizing, charged + slack) << "quantizing: the factor, its copy and the weights";
    EXPECT_LE(factoring, charged);
  }
}

std::vector<Case> Cases() {
  const testing::Scenario fp8{"fp8", "fp8", {}, {"hf_quark"}};
  const testing::Scenario gptq{"uint4_wo_128_gptq", "uint4_wo_128", {GptqAlgo{}}, {"hf_quark"}};
  // #27: the scaling searches and their float stream keep per-token copies (checkpoint/token_pass_memory.h).
  // One trial at a time (a CPU run's default batches this model's small trials).
  const testing::Scenario awq{"uint4_wo_128_awq", "uint4_wo_128", {AwqAlgo{}}, {"hf_quark"}, ObserverKind::kMinMax, 0};
  // AWQ's trials in batches of 32 MiB (a GPU's default is 2 GiB): here 3 ratios a forward of the MLP, 6 of the
  // attention, and every clip factor of a block in one product; the budget adds the allowance.
  const testing::Scenario awq_batched{
      "uint4_wo_128_awq_batched", "uint4_wo_128", {AwqAlgo{}}, {"hf_quark"}, ObserverKind::kMinMax, int64_t{32} << 20};
  const testing::Scenario sq{"int8_smoothquant", "int8", {SmoothQuantAlgo{}}, {"hf_quark"}};
  const testing::Scenario asq{"int8_autosmoothquant", "int8", {AutoSmoothQuantAlgo{}}, {"hf_quark"}};
  // AutoRound trains through the layer: its float targets (one hidden state a token), its tuned tensors and their
  // gradients, and what autograd keeps of one sample's forward. A few iterations show the peak (every iteration holds
  // the same).
  AutoRoundAlgo few_iterations;
  few_iterations.iters = 2;
  const testing::Scenario autoround{"uint4_wo_128_autoround", "uint4_wo_128", {few_iterations}, {"hf_quark"}};
  // In bf16 the quantized copies take half as much, and GPTQ's float32 Hessians and working weight are the wider term.
  return {{fp8, 4}, {fp8, 32}, {gptq, 4}, {gptq, 32}, {gptq, 4, "bf16"}, {fp8, 32, "bf16"},
          {awq, 4}, {awq, 32}, {awq, 4, "bf16"}, {awq_batched, 4}, {awq_batched, 32}, {awq_batched, 4, "bf16"}, {sq, 32}, {asq, 32}, {autoround, 4}, {autoround, 32}, {autoround, 32, "bf16"}};
}

INSTANTIATE_TEST_SUITE_P(Runs, PassMemoryTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.scenario.name + "_" + std::to_string(info.param.samples) + "_samples_" +
                                  info.param.compute_dtype;
                         });

}  // namespace
}  // namespace quark
