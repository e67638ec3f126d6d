// AWQ in the estimator (core/estimate/awq_cost.h): the ratio grid's inspected forwards (the linears run a second time
// inside a block inspected for another pair, the attention scores) and trial weights; the clip search's sampled tokens
// (Quark's 0::T // n), the linears it takes, its work a linear; and the AWQ phase's charge for both.
#include "core/estimate/awq_cost.h"

#include <unistd.h>

#include <filesystem>
#include <string>
#include <tuple>

#include <gtest/gtest.h>

#include "core/checkpoint/token_pass_memory.h"
#include "core/config/presets.h"
#include "core/estimate/job_estimate.h"
#include "tests/estimate/synthetic_model.h"

namespace quark::estimate {
namespace {

namespace fs = std::filesystem;

// Quark's _search_best_clip: input_feat[:, 0::T // n] with n = min(T, 512), the stride at least 1.
TEST(AwqClipCostTest, SamplesEveryStrideThTokenAsQuark) {
  struct Case {
    int64_t tokens, stride, sampled;
  };
  for (const Case& c : {Case{0, 1, 0}, Case{1, 1, 1}, Case{100, 1, 100}, Case{512, 1, 512}, Case{700, 1, 700},
                        Case{1023, 1, 1023}, Case{1024, 2, 512}, Case{1500, 2, 750}, Case{2048, 4, 512},
                        Case{2049, 4, 513}, Case{262144, 512, 512}}) {
    SCOPED_TRACE(c.tokens);
    EXPECT_EQ(checkpoint::AwqClipTokenStride(c.tokens), c.stride);
    EXPECT_EQ(checkpoint::AwqClipSampledTokens(c.tokens), c.sampled);
  }
  EXPECT_EQ(checkpoint::AwqClipSampledTokens(300, 64), 75);  // stride 300 / 64 = 4: tokens 0, 4, ..., 296
}

TEST(AwqClipCostTest, LeavesTheQueryAndKeyProjectionsAlone) {
  for (const char* name : {"self_attn.q_proj", "self_attn.k_proj", "attention.query", "attention.key", "attn.Wqkv"}) {
    EXPECT_FALSE(checkpoint::AwqClipsLinear(name)) << name;
    const ClipSearchWork work = AwqClipSearchWork(name, 4096, 4096, 2048);
    EXPECT_EQ(work.product_flops + work.trial_weight_bytes, 0.0) << name;
  }
  for (const char* name : {"self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"}) {
    EXPECT_TRUE(checkpoint::AwqClipsLinear(name)) << name;
  }
}

// A Llama-2-7B down_proj [4096, 11008] over 2,048 tokens: 512 sampled, 10 shrink factors and the float outputs.
TEST(AwqClipCostTest, CountsTheProductsAndTheTrialWeights) {
  const ClipSearchWork work = AwqClipSearchWork("mlp.down_proj", 4096, 11008, 2048);
  EXPECT_DOUBLE_EQ(work.product_flops, 11 * 2.0 * 512 * 4096 * 11008);
  EXPECT_DOUBLE_EQ(work.trial_weight_bytes, 10 * 4.0 * 4096 * 11008);
  // 1,500 tokens: every 2nd, 750.
  EXPECT_DOUBLE_EQ(AwqClipSearchWork("mlp.down_proj", 4096, 11008, 1500).product_flops, 11 * 2.0 * 750 * 4096 * 11008);
  Throughput rates;
  rates.gemm_flops = 1e11;
  rates.fake_quant_bytes_per_s = 1e9;
  EXPECT_DOUBLE_EQ(AwqClipSearchSeconds(work, rates), work.product_flops / 1e11 + work.trial_weight_bytes / 1e9);
}

// The default pairs' inspected blocks (quantize/scaling_pass.cc): the attention for q/k/v holds o, the MLP (or MoE
// block) for gate/up holds down; OPT's fc1 is inspected alone.
TEST(AwqGridCostTest, OutputAndDownProjectionsRunAgainInsideInspectedBlocks) {
  for (const char* twice : {"self_attn.o_proj", "self_attn.out_proj", "mlp.down_proj", "mlp.experts.7.down_proj",
                            "mlp.shared_expert.down_proj", "block_sparse_moe.experts.0.w2"}) {
    EXPECT_TRUE(AwqRunsInsideAnInspectedBlock(twice)) << twice;
  }
  for (const char* once : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.qkv_proj",
                           "mlp.gate_proj", "mlp.up_proj", "mlp.gate_up_proj", "fc1", "fc2",
                           "block_sparse_moe.experts.0.w1", "block_sparse_moe.experts.0.w3"}) {
    EXPECT_FALSE(AwqRunsInsideAnInspectedBlock(once)) << once;
  }
  // 20 ratios and the reference: 21 forwards; 20 trial weights.
  const AwqGridWork o = AwqGridLinearWork("self_attn.o_proj", 4096, 4096, 4096.0 * 4096, 2048, 20);
  EXPECT_DOUBLE_EQ(o.forward_flops, 2 * 21 * 2.0 * 4096 * 4096 * 2048);
  EXPECT_DOUBLE_EQ(o.trial_weight_bytes, 20 * 4.0 * 4096 * 4096);
  // A routed expert: its forwards at its share of the tokens, its whole weight quantized per ratio.
  const AwqGridWork expert = AwqGridLinearWork("mlp.experts.3.gate_proj", 768, 256, 768.0 * 256 / 8, 512, 20);
  EXPECT_DOUBLE_EQ(expert.forward_flops, 21 * 2.0 * 768 * 256 / 8 * 512);
  EXPECT_DOUBLE_EQ(expert.trial_weight_bytes, 20 * 4.0 * 768 * 256);
  EXPECT_DOUBLE_EQ(AwqGridAttentionWork(4096, 2048, 3, 20).forward_flops, 21 * 4.0 * 2048 * 2048 * 4096 * 3);
  EXPECT_EQ(AwqGridLinearWork("mlp.up_proj", 0, 256, 0, 512, 20).forward_flops, 0);
}

// The AWQ phase: the ratio grid (each pair's inspected forwards, the reference and 20 ratios, and 20 trial weights a
// linear) plus the clip search of v, o, gate, up and down, on a 2-layer model (hidden 256, intermediate 768) over 2
// samples of 32 tokens (all 64 sampled).
TEST(AwqClipCostTest, TheAwqPhaseChargesTheGridAndTheClipSearch) {
  const std::string dir = (fs::temp_directory_path() / ("awq_cost_" + std::to_string(getpid()))).string();
  testing::WriteBf16Llama(dir, 256, 768, 2);
  const absl::StatusOr<ModelShape> model = ReadModelShape(dir);
  fs::remove_all(dir);
  ASSERT_TRUE(model.ok()) << model.status();
  JobInputs job;
  job.config = *PresetConfig("uint4_wo_128");
  job.config.algo_config.push_back(AwqAlgo{});
  job.calibration_samples = 2;
  job.calibration_seq_len = 32;
  const Throughput rates = ReferenceThroughput();
  const absl::StatusOr<JobEstimate> e = EstimateJob(*model, job, rates);
  ASSERT_TRUE(e.ok()) << e.status();
  double awq = -1;
  for (const PhaseEstimate& p : e->phases) {
    if (p.phase == "awq") awq = p.seconds;
  }
  ASSERT_GE(awq, 0.0) << "no awq phase";
  const double tokens = 64, layer_params = 4 * 256.0 * 256 + 3 * 768.0 * 256;
  // q, k, v and gate, up once; o and down twice (inside the attention and the MLP inspected for q/k/v and gate/up).
  const double inspected_params = layer_params + 256.0 * 256 + 256.0 * 768;
  const double attention_scores = 21 * 4.0 * 32 * 32 * 256 * 2;
  const double grid_forwards = (21 * 2 * inspected_params * tokens + attention_scores) / rates.gemm_flops;
  const double grid_trial_weights = 4 * layer_params * 20 / rates.fake_quant_bytes_per_s;
  const double grid = 2 * (grid_forwards + grid_trial_weights);  // two layers
  ClipSearchWork layer;
  using Shape = std::tuple<const char*, int64_t, int64_t>;
  for (const auto& [name, out, in] : {Shape{"self_attn.v_proj", 256, 256}, Shape{"self_attn.o_proj", 256, 256},
                                      Shape{"mlp.gate_proj", 768, 256}, Shape{"mlp.up_proj", 768, 256},
                                      Shape{"mlp.down_proj", 256, 768}}) {
    layer += AwqClipSearchWork(name, out, in, 64);
  }
  EXPECT_DOUBLE_EQ(layer.product_flops, 11 * 2.0 * 64 * (2 * 256 * 256 + 3 * 768 * 256));
  ClipSearchWork both = layer;
  both += layer;
  EXPECT_NEAR(awq, grid + AwqClipSearchSeconds(both, rates), 1e-12 * awq);
}

}  // namespace
}  // namespace quark::estimate
