// #32: the estimator on gpt-oss-20b-2l's shape. GPTQ's memory on an MoE model: GPTQ captures the Hessians of a step's routed linears in one pass
// (one projection of every expert: "mlp.experts.*.gate_up_proj"), so all of them, then their factors, are alive at
// once; the estimate once counted one K x K matrix, ~1 GB short on gpt-oss-20b-2l (32 experts, K = 2880).
// The GPTQ phase's extra memory is read off the phases: gptq = base + 1.5 L + A + extra, calibrate = base + 2 L + A,
// load = base + L (job_estimate.h). And the GGUF artifact (gguf_gpt_oss_plan.h), which the estimate once refused.
#include <gtest/gtest.h>

#include "core/config/presets.h"
#include "core/estimate/deepseek_shape.h"
#include "core/estimate/gpt_oss_shape.h"
#include "core/estimate/expert_group_choice.h"
#include "core/estimate/job_estimate.h"
#include "core/runtime/deepseek_synthetic.h"
#include "core/runtime/gpt_oss_synthetic.h"

namespace quark::estimate {
namespace {

double PeakOf(const JobEstimate& e, const std::string& phase) {
  for (const PhaseEstimate& p : e.phases) {
    if (p.phase == phase) return static_cast<double>(p.peak_host_bytes);
  }
  ADD_FAILURE() << "no phase " << phase;
  return 0;
}

// The GPTQ phase's bytes beyond the layer and the activations.
double GptqExtraBytes(const std::vector<std::string>& exclude) {
  const checkpoint::GptOssConfig config = *runtime::GptOssSyntheticConfig("gpt-oss-20b-2l", "bfloat16");
  const ModelShape shape = GptOssModelShape(config, checkpoint::StDType::kBF16);
  JobInputs job;
  job.config = *PresetConfig("uint4_wo_32");
  job.config.algo_config.push_back(GptqAlgo{});
  job.config.exclude = exclude;
  job.calibration_samples = 4;
  job.calibration_seq_len = 64;
  absl::StatusOr<JobEstimate> e = EstimateJob(shape, job, ReferenceThroughput());
  EXPECT_TRUE(e.ok()) << e.status();
  if (!e.ok()) return 0;
  const double layer = PeakOf(*e, "load") - static_cast<double>(kProcessBaseBytes);
  return PeakOf(*e, "gptq") - PeakOf(*e, "calibrate") + layer / 2;
}

TEST(MoeGptqEstimateTest, CountsEveryExpertHessianOfAStep) {
  // 32 experts' gate_up_proj inputs (K = hidden = 2880) captured together; down_proj's step (K = 2880) is as large.
  EXPECT_NEAR(GptqExtraBytes({"lm_head"}), static_cast<double>(kGptqWorkspaceBytes) + 32.0 * 2880 * 2880 * 4, 16);
}

TEST(MoeGptqEstimateTest, OneHessianWhenEveryStepReadsOneInput) {
  // The experts left in float: the widest input is o_proj's (64 heads x 64 = 4096), one matrix at a time.
  EXPECT_NEAR(GptqExtraBytes({"lm_head", "*experts*"}), static_cast<double>(kGptqWorkspaceBytes) + 4096.0 * 4096 * 4,
              16);
}

// The GGUF's bytes with every linear in OCP MXFP4 (the experts then GGML MXFP4: 17 bytes per 32 weights) against the
// float file: exactly the experts' weights shrink, from 4 bytes to 17/32 each.
TEST(MoeGgufEstimateTest, Mxfp4ExpertsShrinkTheFileByTheirBlocks) {
  const checkpoint::GptOssConfig config = *runtime::GptOssSyntheticConfig("gpt-oss-20b-2l", "bfloat16");
  const ModelShape shape = GptOssModelShape(config, checkpoint::StDType::kBF16);
  auto gguf_bytes = [&](const std::string& preset) -> double {
    JobInputs job;
    if (!preset.empty()) job.config = *PresetConfig(preset);  // "": nothing quantized, every weight F32
    job.formats = {ExportKind::kGguf};
    job.calibration_samples = 1;
    absl::StatusOr<JobEstimate> e = EstimateJob(shape, job, ReferenceThroughput());
    EXPECT_TRUE(e.ok()) << e.status();
    if (!e.ok()) return 0;
    for (const std::string& note : e->notes) ADD_FAILURE() << preset << ": " << note;
    for (const ArtifactEstimate& a : e->artifacts) {
      if (a.format == ExportKind::kGguf) return static_cast<double>(a.bytes);
    }
    ADD_FAILURE() << preset << ": no GGUF artifact";
    return 0;
  };
  const double experts = 2.0 * 32 * 3 * 2880 * 2880;  // 2 layers x 32 experts x (gate_up 2 x 2880^2 + down 2880^2)
  // Alignment padding moves each of the 2 x 3 expert tensors by < 32 bytes.
  EXPECT_NEAR(gguf_bytes("") - gguf_bytes("mxfp4_weight_only"), experts * (4 - 17.0 / 32), 6 * 32);
}

// #32 item 5: DeepSeek-V3's real shape (the 4-layer cut: 3 dense layers and one MoE layer as large as the 671B model's)
// with its routed experts streamed in groups of G: the layer term (the load phase's base + 4 x held parameters,
// job_estimate.h) drops by exactly 256 - G experts of 3 x 7168 x 2048 in float32 until a dense layer is the largest,
// G >= 256 is the whole layer, and an algorithm is refused as the run refuses it.
ModelShape DeepseekV3Cut() {
  const checkpoint::DeepseekConfig config = *runtime::DeepseekSyntheticConfig("deepseek-v3-4l", "bfloat16");
  return DeepseekModelShape(config, checkpoint::StDType::kBF16);
}

// fp8 over 4 calibration samples of 64 tokens (the measured runs' job).
JobInputs Fp8Job(int64_t group_size) {
  JobInputs job;
  job.config = *PresetConfig("fp8");
  job.calibration_samples = 4;
  job.calibration_seq_len = 64;
  job.expert_group_size = group_size;
  return job;
}

absl::StatusOr<JobEstimate> DeepseekV3Fp8(int64_t group_size) {
  return EstimateJob(DeepseekV3Cut(), Fp8Job(group_size), ReferenceThroughput());
}

TEST(ExpertGroupEstimateTest, HoldsGExpertsOfTheLargestMoeLayer) {
  const double expert = 3.0 * 7168 * 2048;
  auto whole = DeepseekV3Fp8(0), g8 = DeepseekV3Fp8(8), g1 = DeepseekV3Fp8(1), all = DeepseekV3Fp8(256);
  for (const auto* e : {&whole, &g8, &g1, &all}) ASSERT_TRUE(e->ok()) << e->status();
  EXPECT_DOUBLE_EQ(PeakOf(*whole, "load") - PeakOf(*g8, "load"), 4 * 248 * expert);
  // From G = 8 down a dense layer is the largest: its 7168 x 18432 MLP is nine experts' worth, as G = 8 and the shared
  // expert are, so G = 1 holds no less.
  EXPECT_DOUBLE_EQ(PeakOf(*g8, "load"), PeakOf(*g1, "load"));
  EXPECT_DOUBLE_EQ(PeakOf(*all, "load"), PeakOf(*whole, "load"));
  // The calibrate phase holds the layer twice (float32 and fake-quantized weights): 2 x the layer term's difference.
  EXPECT_DOUBLE_EQ(PeakOf(*whole, "calibrate") - PeakOf(*g8, "calibrate"), 2 * 4 * 248 * expert);
}

TEST(ExpertGroupEstimateTest, RefusedWithAnotherAlgorithmAsTheRunIs) {
  const checkpoint::DeepseekConfig config = *runtime::DeepseekSyntheticConfig("deepseek-v3-4l", "bfloat16");
  GptqAlgo gptaq;
  gptaq.method = HessianMethod::kGptaq;
  for (const std::vector<AlgoConfig>& algos :
       {std::vector<AlgoConfig>{AwqAlgo{}}, std::vector<AlgoConfig>{gptaq}, std::vector<AlgoConfig>{AwqAlgo{}, GptqAlgo{}}}) {
    JobInputs job;
    job.config = *PresetConfig("uint4_wo_128");
    job.config.algo_config = algos;
    job.expert_group_size = 4;
    auto e = EstimateJob(DeepseekModelShape(config, checkpoint::StDType::kBF16), job, ReferenceThroughput());
    ASSERT_FALSE(e.ok());
    const std::string message(e.status().message());
    EXPECT_NE(message.find("expert_group_size"), std::string::npos) << message;
    EXPECT_NE(message.find(std::string(AlgoName(algos[0]))), std::string::npos) << message;
    EXPECT_FALSE(CanStreamExperts(job.config));
  }
}

// GPTQ of experts in groups (gpt-oss-20b-2l, 32 experts, top-4, K = 2880 for both expert inputs; 4 x 64 tokens):
// one expert's Hessian at a time instead of a step's 32, so the widest single input counts (o_proj's 64 x 64 =
// 4096), plus the routed block's inputs (256 tokens x 2880 x 4 bytes) and the recorded inputs of G experts:
// (256 x 4 / 32 routed + 32 topped-up tokens) x 2880 x 4 bytes each.
TEST(ExpertGroupEstimateTest, GptqHoldsOneExpertsHessiansAndGExpertsInputs) {
  double seconds[2] = {0, 0};  // G = 1, G = 8
  for (const int64_t group : {int64_t{1}, int64_t{8}}) {
    const checkpoint::GptOssConfig config = *runtime::GptOssSyntheticConfig("gpt-oss-20b-2l", "bfloat16");
    const ModelShape shape = GptOssModelShape(config, checkpoint::StDType::kBF16);
    JobInputs job;
    job.config = *PresetConfig("uint4_wo_32");
    job.config.algo_config.push_back(GptqAlgo{});
    job.config.exclude = {"lm_head"};
    job.calibration_samples = 4;
    job.calibration_seq_len = 64;
    job.expert_group_size = group;
    EXPECT_TRUE(CanStreamExperts(job.config));
    absl::StatusOr<JobEstimate> e = EstimateJob(shape, job, ReferenceThroughput());
    ASSERT_TRUE(e.ok()) << e.status();
    const double layer = PeakOf(*e, "load") - static_cast<double>(kProcessBaseBytes);
    const double extra = PeakOf(*e, "gptq") - PeakOf(*e, "calibrate") + layer / 2;
    EXPECT_NEAR(extra,
                static_cast<double>(kGptqWorkspaceBytes) + 4096.0 * 4096 * 4 + 4.0 * 2880 * (group * (32 + 32) + 256),
                16)
        << "expert_group_size " << group;
    job.expert_group_size = 0;
    absl::StatusOr<JobEstimate> whole = EstimateJob(shape, job, ReferenceThroughput());
    ASSERT_TRUE(whole.ok()) << whole.status();
    EXPECT_LT(PeakOf(*e, "gptq"), PeakOf(*whole, "gptq"));
    for (const auto& p : e->phases) seconds[group == 8] += p.phase == "gptq" ? p.seconds : 0;
  }
  // The recording passes: ceil(32 / G) passes of each MoE layer's router (gpt-oss has no shared expert), 32 at G = 1.
  EXPECT_GT(seconds[0], seconds[1]);
}

// --expert-group-size auto on deepseek-v3-4l (256 experts, fp8): the largest G whose estimated peak fits the budget,
// 0 when the whole layer does, refused naming the budget below G = 1's peak.
TEST(ExpertGroupChoiceTest, TheLargestGroupWhosePeakFitsTheBudget) {
  const ModelShape shape = DeepseekV3Cut();
  const JobInputs job = Fp8Job(0);
  const auto peak = [&](int64_t group) { return DeepseekV3Fp8(group)->peak_host_bytes; };
  ASSERT_LT(peak(99), peak(100));
  auto exact = ChooseExpertGroupSize(shape, job, peak(100));
  ASSERT_TRUE(exact.ok()) << exact.status();
  EXPECT_EQ(exact->group_size, 100);
  EXPECT_EQ(exact->peak_host_bytes, peak(100));
  EXPECT_EQ(exact->whole_layer_bytes, peak(0));
  EXPECT_EQ(exact->experts, 256);
  EXPECT_EQ(ChooseExpertGroupSize(shape, job, peak(100) - 1)->group_size, 99);
  EXPECT_EQ(ChooseExpertGroupSize(shape, job, peak(255))->group_size, 255);
  EXPECT_EQ(ChooseExpertGroupSize(shape, job, peak(0))->group_size, 0) << "the whole layer fits";
  // From G = 8 down the dense layer bounds the peak: a budget of G = 1's peak takes the largest such G.
  EXPECT_EQ(ChooseExpertGroupSize(shape, job, peak(1))->group_size, 8);
  auto refused = ChooseExpertGroupSize(shape, job, peak(1) - 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(std::string(refused.status().message()).find("memory budget"), std::string::npos) << refused.status();
}

// What quarkd records as an MoE job's host memory need (server/api/job_estimates.cc): one expert at a time's peak when
// the run can stream its experts (a worker short of memory does by itself; RTN or GPTQ alone), the whole layer's when
// it cannot (another algorithm, imatrix_mse weights) or the model has no routed experts.
TEST(ExpertGroupChoiceTest, AJobNeedsWhatOneExpertAtATimeTakesWhenItCanStream) {
  const ModelShape shape = DeepseekV3Cut();
  const auto peak = [&](int64_t group) { return DeepseekV3Fp8(group)->peak_host_bytes; };
  auto least = LeastHostMemoryEstimate(shape, Fp8Job(0), ReferenceThroughput());
  ASSERT_TRUE(least.ok()) << least.status();
  EXPECT_EQ(least->peak_host_bytes, peak(1));
  EXPECT_LT(least->peak_host_bytes, peak(0) / 10);
  JobInputs awq = Fp8Job(0);
  awq.config.algo_config.push_back(AwqAlgo{});
  EXPECT_FALSE(CanStreamExperts(awq.config));
  EXPECT_EQ(LeastHostMemoryEstimate(shape, awq, ReferenceThroughput())->peak_host_bytes,
            EstimateJob(shape, awq, ReferenceThroughput())->peak_host_bytes);
  // GPTQ alone streams its experts (expert by expert): one at a time is its least.
  JobInputs gptq = Fp8Job(0);
  gptq.config.algo_config.push_back(GptqAlgo{});
  EXPECT_TRUE(CanStreamExperts(gptq.config));
  JobInputs gptq_one = gptq;
  gptq_one.expert_group_size = 1;
  const uint64_t gptq_least = LeastHostMemoryEstimate(shape, gptq, ReferenceThroughput())->peak_host_bytes;
  EXPECT_EQ(gptq_least, EstimateJob(shape, gptq_one, ReferenceThroughput())->peak_host_bytes);
  EXPECT_LT(gptq_least, EstimateJob(shape, gptq, ReferenceThroughput())->peak_host_bytes / 10);
  JobInputs imatrix = Fp8Job(0);
  imatrix.config.layer_quant_config.push_back({"*down_proj", imatrix.config.global_quant_config});
  imatrix.config.layer_quant_config.back().config.weight->observer = ObserverKind::kImatrixMse;
  EXPECT_FALSE(CanStreamExperts(imatrix.config));
  EXPECT_FALSE(ChooseExpertGroupSize(shape, imatrix, peak(1)).ok());
  EXPECT_TRUE(CanStreamExperts(Fp8Job(0).config));
}

}  // namespace
}  // namespace quark::estimate
