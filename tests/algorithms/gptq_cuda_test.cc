// GPTQ on a CUDA device (the tensor-operation path, cuBLAS and cuSOLVER) against the optimized CPU path on the same
// layer: the parity bound, output error within 0.1% of the CPU path's. cuBLAS sums the Hessian and the lazy
// updates in another order, and GPTQ carries last-bit differences on into other rounding decisions: on the H200
// (LibTorch 2.11, CUDA 13) the errors were 0.058% and 0.047% apart, while the values equal to the CPU's were 16.9%
// with groups observed on the updated weight (a group's scale moves with any earlier difference, so all of its values
// do) and 98.7% with static groups (only the flipped codes differ). So the values are held to 98% with static groups
// and only printed otherwise. Labelled `gpu`; skips, saying so, where LibTorch sees no CUDA device, and fails there
// when QUARK_EXPECT_CUDA is set (the GPU kit). GPTAQ and Qronos, which share GPTQ's fused blocks, at the end.
#include <gtest/gtest.h>

#include <cstdlib>

#include "core/algorithms/asymmetric_gptq.h"
#include "core/algorithms/gptq.h"
#include "core/algorithms/hessian.h"
#include "core/config/presets.h"
#include "tests/algorithms/gptq_test_specs.h"
#include "tests/support/require_cuda.h"

namespace quark::algorithms {
namespace {

class GptqCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    QUARK_REQUIRE_CUDA("GPTQ was not run on CUDA");
  }
};

QuantSpec Uint4Group128() { return testing::IntSpec(DType::kUInt4, /*symmetric=*/false, 128); }

double RelativeOutputError(const at::Tensor& x, const at::Tensor& w, const at::Tensor& q) {
  const at::Tensor ref = at::matmul(x, w.t()).to(at::kDouble);
  return (ref - at::matmul(x, q.t()).to(at::kDouble)).pow(2).sum().item<double>() / ref.pow(2).sum().item<double>();
}

TEST_F(GptqCudaTest, MatchesTheCpuPathWithinTheParityBounds) {
  const at::Device cuda(at::kCUDA, 0);
  at::manual_seed(0);
  const int64_t n = 4096, k = 4096, tokens = 2048;
  const at::Tensor channel_scale = at::exp(at::randn({k}) * 0.8);
  const at::Tensor x = (at::matmul(at::randn({tokens, k / 8}), at::randn({k / 8, k})) + 0.3 * at::randn({tokens, k})) *
                       channel_scale;
  const at::Tensor w = at::randn({n, k}) * 0.02;
  for (bool act_order : {false, true}) {
    GptqOptions options;
    options.act_order = act_order;
    options.static_groups = act_order;
    HessianAccumulator cpu_h(k), cuda_h(k);
    ASSERT_TRUE(cpu_h.Add(x.unsqueeze(0)).ok());
    ASSERT_TRUE(cuda_h.Add(x.to(cuda).unsqueeze(0)).ok());
    auto cpu = GptqQuantizeWeight(w, *std::move(cpu_h).Finish(), Uint4Group128(), options);
    auto gpu = GptqQuantizeWeight(w.to(cuda), *std::move(cuda_h).Finish(), Uint4Group128(), options);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    ASSERT_TRUE(gpu->weight.is_cuda());
    const at::Tensor on_host = gpu->weight.cpu();
    const double cpu_error = RelativeOutputError(x, w, cpu->weight), gpu_error = RelativeOutputError(x, w, on_host);
    EXPECT_NEAR(gpu_error, cpu_error, 1e-3 * cpu_error) << "act order " << act_order;
    const double equal = (on_host == cpu->weight).to(at::kDouble).mean().item<double>();
    if (options.static_groups) EXPECT_GE(equal, 0.98) << "act order " << act_order;
    std::printf("act_order=%d cpu_error=%.9g cuda_error=%.9g equal=%.6f factor_s=%.3f columns_s=%.3f\n", act_order,
                cpu_error, gpu_error, equal, gpu->factor_seconds, gpu->columns_seconds);
  }
}

// The fused blocks (one launch a block: kernels/cuda/gptq_cuda.cu) against the column-by-column tensor-op loop on the
// same device with the same Hessian: the same float operations in the same order, so the same bits, for groups
// observed as they start (segments inside a block), static groups in act order, per channel, bfloat16 and float16
// weights and an odd row count, on integer grids, float ones (fp8, MXFP4, NVFP4 under its global scale), MXINT8 and
// W4A8's two stages.
// Both loops' times are printed (the fused one is the point of the kernel).
TEST_F(GptqCudaTest, FusedBlocksAreTheColumnLoopsBitForBit) {
  const at::Device cuda(at::kCUDA, 0);
  at::manual_seed(1);
  const int64_t k = 1024, tokens = 1024;
  const at::Tensor x = at::matmul(at::randn({tokens, k / 8}), at::randn({k / 8, k})) + 0.3 * at::randn({tokens, k});
  HessianAccumulator accumulator(k);
  ASSERT_TRUE(accumulator.Add(x.to(cuda).unsqueeze(0)).ok());
  const at::Tensor h = *std::move(accumulator).Finish();
  struct Case {
    const char* name;
    QuantSpec spec;
    bool act_order;
    at::ScalarType dtype;
    int64_t rows;
  };
  QuantSpec floor_spec = testing::IntSpec(DType::kInt8, true, -1);
  floor_spec.round_method = RoundMethod::kFloor;
  auto nvfp4 = PresetConfig("nvfp4_weight_only");
  ASSERT_TRUE(nvfp4.ok()) << nvfp4.status();
  auto mxint8 = PresetConfig("mxint8");
  ASSERT_TRUE(mxint8.ok()) << mxint8.status();
  auto w4a8 = PresetConfig("int4_fp8");
  ASSERT_TRUE(w4a8.ok()) << w4a8.status();
  const Case cases[] = {
      {"uint4 g128", Uint4Group128(), false, at::kFloat, 1000},
      {"int4 g32 observed (segments)", testing::IntSpec(DType::kInt4, true, 32), false, at::kBFloat16, 333},
      {"uint4 g128 act order static groups", Uint4Group128(), true, at::kBFloat16, 1024},
      {"int8 per channel floor", floor_spec, false, at::kHalf, 257},
      {"fp8 per channel", testing::Fp8PerChannel(), false, at::kBFloat16, 300},
      {"mxfp4 observed (segments)", testing::Mxfp4(), false, at::kFloat, 256},
      {"nvfp4 act order static groups", *nvfp4->global_quant_config.weight, true, at::kBFloat16, 512},
      {"mxint8 observed (segments)", *mxint8->global_quant_config.weight, false, at::kHalf, 130},
      {"w4a8 act order", *w4a8->global_quant_config.weight, true, at::kBFloat16, 200},
  };
  for (const Case& c : cases) {
    const at::Tensor w = (at::randn({c.rows, k}) * 0.02).to(cuda, c.dtype);
    GptqOptions fused;
    fused.act_order = c.act_order;
    fused.static_groups = c.act_order;
    GptqOptions columns = fused;
    columns.fused_blocks = false;
    auto a = GptqQuantizeWeight(w, h.clone(), c.spec, columns);
    auto b = GptqQuantizeWeight(w, h.clone(), c.spec, fused);
    ASSERT_TRUE(a.ok()) << c.name << ": " << a.status();
    ASSERT_TRUE(b.ok()) << c.name << ": " << b.status();
    EXPECT_TRUE(b->fused_blocks) << c.name;
    EXPECT_EQ((a->weight != b->weight).sum().item<int64_t>(), 0) << c.name;
    EXPECT_TRUE(at::equal(a->params.scale, b->params.scale)) << c.name;
    EXPECT_TRUE(at::equal(a->params.zero_point, b->params.zero_point)) << c.name;
    std::printf("%s: columns_s column loop %.4f, fused %.4f\n", c.name, a->columns_seconds, b->columns_seconds);
  }
}

// GPTAQ's and Qronos's column loops in fused blocks on the device (GPTAQ's update row with its P term, Qronos's GPTQ
// loop on columns 1..) against their column-by-column tensor-op loops there: the same bits (asymmetric_gptq_test.cc
// shows the same on the CPU).
TEST_F(GptqCudaTest, AsymmetricFusedBlocksAreTheColumnLoopsBitForBit) {
  const at::Device cuda(at::kCUDA, 0);
  at::manual_seed(3);
  const int64_t k = 512, tokens = 1024;
  const at::Tensor x = at::matmul(at::randn({tokens, k / 8}), at::randn({k / 8, k})) + 0.3 * at::randn({tokens, k});
  const at::Tensor drifted = x + 0.1 * at::matmul(at::randn({tokens, k / 8}), at::randn({k / 8, k}));
  for (HessianMethod method : {HessianMethod::kGptaq, HessianMethod::kQronos}) {
    const char* name = method == HessianMethod::kGptaq ? "gptaq" : "qronos";
    AsymmetricStats stats(method, k);
    ASSERT_TRUE(stats.Add(drifted.to(cuda).unsqueeze(0), x.to(cuda).unsqueeze(0)).ok());
    for (const QuantSpec& spec : {Uint4Group128(), testing::Nvfp4(), testing::W4A8()}) {
      const at::Tensor w = (at::randn({300, k}) * 0.02).to(cuda, at::kBFloat16);
      AsymmetricOptions fused;
      fused.method = method;
      fused.alpha = method == HessianMethod::kGptaq ? 0.25 : 1e-3;
      fused.gptq.act_order = true;
      fused.gptq.static_groups = true;
      AsymmetricOptions columns = fused;
      columns.gptq.fused_blocks = false;
      auto a = AsymmetricQuantizeWeight(w, stats.hessian(), stats.cross(), spec, columns);
      auto b = AsymmetricQuantizeWeight(w, stats.hessian(), stats.cross(), spec, fused);
      ASSERT_TRUE(a.ok()) << name << ": " << a.status();
      ASSERT_TRUE(b.ok()) << name << ": " << b.status();
      EXPECT_TRUE(b->fused_blocks) << name;
      EXPECT_EQ((a->weight != b->weight).sum().item<int64_t>(), 0) << name;
      EXPECT_TRUE(at::equal(a->params.scale, b->params.scale)) << name;
      std::printf("%s: columns_s column loop %.4f, fused %.4f\n", name, a->columns_seconds, b->columns_seconds);
    }
  }
}

}  // namespace
}  // namespace quark::algorithms
