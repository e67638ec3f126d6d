// GPTQ's tensor-operation path (what a GPU runs) against the optimized CPU path, both on the CPU: the Hessian, the
// inverse Hessian factor and the quantized weights must agree bit for bit (both do Quark's arithmetic element for
// element, in the same order), for every kind of spec the column loop handles. The Hessian's and the weights' bits
// compare GEMMs of different shapes (the CPU path's panels and row blocks, the tensor path's one call), which sum
// alike on OpenBLAS's AVX-512 kernels only (tests/algorithms/blas_kernels.h); on other kernels (Haswell / Zen: AVX2,
// what OpenBLAS 0.3.21 picks on some AVX-512 AMD EPYCs) the Hessians are held to the float64 bound and the weights
// to the parity bound on the layer's output error, and the test says so.
#include "core/algorithms/gptq_tensor_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "core/algorithms/hessian.h"
#include "core/numerics/fake_quant.h"
#include "tests/algorithms/blas_kernels.h"
#include "tests/algorithms/gptq_test_specs.h"
#include "tests/algorithms/hessian_bound.h"

namespace quark::algorithms {
namespace {

using testing::Fp8PerChannel;
using testing::Fp8Tiles;
using testing::Int8PerTensor;
using testing::IntSpec;
using testing::Mxfp4;
using testing::Nvfp4;
using testing::Uint8Tiles;
using testing::W4A8;

// Correlated inputs with outlier channels (as real activations), in batches of uneven token counts.
std::vector<at::Tensor> MakeInputs(int64_t k, std::vector<int64_t> token_counts, uint64_t seed) {
  at::manual_seed(seed);
  const at::Tensor channel_scale = at::exp(at::randn({k}) * 0.8);
  const int64_t rank = std::max<int64_t>(4, k / 8);
  const at::Tensor mix = at::randn({rank, k});
  std::vector<at::Tensor> batches;
  for (int64_t tokens : token_counts) {
    batches.push_back(((at::matmul(at::randn({tokens, rank}), mix) + 0.3 * at::randn({tokens, k})) * channel_scale)
                          .unsqueeze(0));
  }
  return batches;
}

at::Tensor HessianOf(const std::vector<at::Tensor>& batches, bool tensor_ops) {
  HessianAccumulator h(batches[0].size(-1), /*fast=*/false, tensor_ops);
  for (const at::Tensor& x : batches) EXPECT_TRUE(h.Add(x).ok());
  auto sum = std::move(h).Finish();
  EXPECT_TRUE(sum.ok()) << sum.status();
  return *std::move(sum);
}

int64_t Differing(const at::Tensor& a, const at::Tensor& b) { return (a != b).sum().item<int64_t>(); }

TEST(GptqTensorOpsTest, HessianIsTheCpuPathsBitForBit) {
  const ::testing::AssertionResult bits = testing::BitForBitBlasKernels(testing::Verified::kAvx512);
  if (!bits) std::cout << "Bits not compared, float64 bound only: " << bits.message() << "\n";
  // Token counts that the BLAS splits into blocks unevenly, and a second and third batch (the rescaling).
  for (int64_t k : {96, 600}) {
    const std::vector<at::Tensor> batches = MakeInputs(k, {700, 333, 1}, 1);
    const at::Tensor cpu = HessianOf(batches, false), ops = HessianOf(batches, true);
    EXPECT_TRUE(testing::WithinFloat32Bound(cpu, ops, batches)) << "k " << k;  // ops: Quark's full GEMM
    if (bits) EXPECT_EQ(Differing(cpu, ops), 0) << "k " << k;
  }
}

TEST(GptqTensorOpsTest, FactorIsTheCpuPathsBitForBit) {
  const at::Tensor h = HessianOf(MakeInputs(256, {512}, 2), false);
  for (bool act_order : {false, true}) {
    GptqOptions cpu;
    cpu.act_order = act_order;
    GptqOptions ops = cpu;
    ops.tensor_ops = true;
    auto a = GptqFactorOf(h.clone(), cpu);
    auto b = GptqFactorOf(h.clone(), ops);
    ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
    EXPECT_EQ(Differing(a->upper.triu(), b->upper.triu()), 0) << "act order " << act_order;
    EXPECT_TRUE(at::equal(a->dead, b->dead));
    if (act_order) EXPECT_TRUE(at::equal(a->perm, b->perm));
  }
  // The fast factorisation: the same factor up to rounding.
  GptqOptions fast;
  fast.fast_linalg = true;
  GptqOptions fast_ops = fast;
  fast_ops.tensor_ops = true;
  auto a = GptqFactorOf(h.clone(), fast);
  auto b = GptqFactorOf(h.clone(), fast_ops);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  EXPECT_TRUE(at::allclose(a->upper.triu(), b->upper, 1e-4, 1e-5));
}

struct Case {
  std::string name;
  QuantSpec spec;
  bool act_order = false;
  bool static_groups = false;
  at::ScalarType dtype = at::kFloat;
};

std::vector<Case> Cases() {
  return {
      {"int4 per channel", IntSpec(DType::kInt4, true, -1)},
      {"uint4 g32 asymmetric", IntSpec(DType::kUInt4, false, 32)},
      {"uint4 g128 act order static groups", IntSpec(DType::kUInt4, false, 128), true, true},
      {"int4 g32 static groups", IntSpec(DType::kInt4, true, 32), false, true},
      {"int8 per tensor", Int8PerTensor()},
      {"fp8 per channel act order", Fp8PerChannel(), true},
      {"mxfp4", Mxfp4()},
      {"uint4 g32 bfloat16 weight", IntSpec(DType::kUInt4, false, 32), false, false, at::kBFloat16},
      {"w4a8 act order", W4A8(), true},
      {"w4a8 bfloat16 weight", W4A8(), false, false, at::kBFloat16},
      {"nvfp4 groups observed as they start", Nvfp4()},
      {"nvfp4 act order static groups, bfloat16 weight", Nvfp4(), true, true, at::kBFloat16},
      {"nvfp4 static groups, float16 weight", Nvfp4(), false, true, at::kHalf},
      // 2-D tiles of 24 rows (dividing the tests' 96 and 72 rows) and 64 columns (blocks of 100 straddle them).
      {"fp8 tiles observed as they start", Fp8Tiles(24, 64)},
      {"fp8 tiles act order static groups, bfloat16 weight", Fp8Tiles(24, 64), true, true, at::kBFloat16},
      {"fp8 tiles observed, bfloat16 weight", Fp8Tiles(24, 64), false, false, at::kBFloat16},
      {"uint8 tiles observed as they start", Uint8Tiles(24, 64)},
      {"uint8 tiles static groups, float16 weight", Uint8Tiles(24, 64), false, true, at::kHalf},
  };
}

GptqOptions OptionsOf(const Case& c, int64_t block, bool tensor_ops) {
  GptqOptions options;
  options.act_order = c.act_order;
  options.static_groups = c.static_groups;
  options.block_size = block;
  options.tensor_ops = tensor_ops;
  return options;
}

// The layer's output error of a quantized weight over the calibration tokens, ||X (Wq - W)^T||^2, in float64.
double OutputError(const at::Tensor& quantized, const at::Tensor& weight, const std::vector<at::Tensor>& batches) {
  double error = 0;
  for (const at::Tensor& x : batches) {
    const at::Tensor tokens = x.reshape({-1, x.size(-1)}).to(at::kDouble);
    error += tokens.matmul((quantized.to(at::kDouble) - weight.to(at::kDouble)).t()).pow(2).sum().item<double>();
  }
  return error;
}

TEST(GptqTensorOpsTest, WeightsAreTheCpuPathsBitForBit) {
  const ::testing::AssertionResult bits = testing::BitForBitBlasKernels(testing::Verified::kAvx512);
  if (!bits) std::cout << "Bits not compared, output error within 0.1% only: " << bits.message() << "\n";
  const int64_t n = 96, k = 384;  // with a block of 100: a short last block, and groups that straddle blocks
  const std::vector<at::Tensor> batches = MakeInputs(k, {1024}, 3);
  const at::Tensor h = HessianOf(batches, false);
  at::manual_seed(4);
  const at::Tensor weight = at::randn({n, k}) * 0.02;
  for (const Case& c : Cases()) {
    for (int64_t block : {int64_t{16}, int64_t{100}, int64_t{128}}) {
      const GptqOptions cpu = OptionsOf(c, block, /*tensor_ops=*/false);
      const GptqOptions ops = OptionsOf(c, block, /*tensor_ops=*/true);
      const at::Tensor w = weight.to(c.dtype);
      auto a = GptqQuantizeWeight(w, h.clone(), c.spec, cpu);
      auto b = GptqQuantizeWeight(w, h.clone(), c.spec, ops);
      ASSERT_TRUE(a.ok()) << c.name << ": " << a.status();
      ASSERT_TRUE(b.ok()) << c.name << ": " << b.status();
      EXPECT_EQ(b->weight.scalar_type(), c.dtype) << c.name;
      if (!bits) {
        // The parity bound (#27 item 6): the tensor path's output error within 0.1% of the CPU path's.
        const double cpu_error = OutputError(a->weight, w, batches), ops_error = OutputError(b->weight, w, batches);
        EXPECT_NEAR(ops_error / cpu_error, 1.0, 1e-3) << c.name << ", block " << block;
        continue;
      }
      EXPECT_EQ(Differing(a->weight, b->weight), 0) << c.name << ", block " << block;
      EXPECT_TRUE(at::equal(a->params.scale, b->params.scale)) << c.name;
      EXPECT_TRUE(at::equal(a->params.zero_point, b->params.zero_point)) << c.name;
      EXPECT_EQ(a->params.global_scale.defined(), b->params.global_scale.defined()) << c.name;
      if (a->params.global_scale.defined()) EXPECT_TRUE(at::equal(a->params.global_scale, b->params.global_scale));
    }
  }
}

// The fused blocks (one kernel launch a block, kernels/element/gptq_row.h) against the column-by-column loop of the
// same tensor-op path: the same bits for every spec, dtype, rounding, zero-point kind and block size, including
// groups observed as they start inside a block (segments) and act order's scattered static groups (the float grids
// of the 2026 formats: gptq_formats_test.cc).
TEST(GptqTensorOpsTest, FusedBlocksAreTheColumnLoopsBitForBit) {
  const int64_t n = 72, k = 384;
  const at::Tensor h = HessianOf(MakeInputs(k, {1024}, 8), false);
  at::manual_seed(9);
  const at::Tensor weight = at::randn({n, k}) * 0.02;
  std::vector<Case> cases = Cases();
  QuantSpec away = IntSpec(DType::kUInt4, false, 64);
  away.round_method = RoundMethod::kRound;
  cases.push_back({"uint4 g64 half away from zero", away});
  QuantSpec floor_spec = IntSpec(DType::kInt8, true, -1);
  floor_spec.round_method = RoundMethod::kFloor;
  cases.push_back({"int8 per channel floor, float16 weight", floor_spec, false, false, at::kHalf});
  QuantSpec float_zp = IntSpec(DType::kUInt4, false, 32);
  float_zp.zero_point_type = ZeroPointType::kFloat32;
  cases.push_back({"uint4 g32 float zero point, act order", float_zp, true, true, at::kBFloat16});
  for (const Case& c : cases) {
    for (int64_t block : {int64_t{16}, int64_t{100}, int64_t{128}}) {
      const GptqOptions fused = OptionsOf(c, block, /*tensor_ops=*/true);
      GptqOptions columns = fused;
      columns.fused_blocks = false;
      const at::Tensor w = weight.to(c.dtype);
      auto a = GptqQuantizeWeight(w, h.clone(), c.spec, columns);
      auto b = GptqQuantizeWeight(w, h.clone(), c.spec, fused);
      ASSERT_TRUE(a.ok()) << c.name << ": " << a.status();
      ASSERT_TRUE(b.ok()) << c.name << ": " << b.status();
      EXPECT_FALSE(a->fused_blocks) << c.name;
      EXPECT_TRUE(b->fused_blocks) << c.name;
      EXPECT_EQ(Differing(a->weight, b->weight), 0) << c.name << ", block " << block;
      EXPECT_TRUE(at::equal(a->params.scale, b->params.scale)) << c.name << ", block " << block;
      EXPECT_TRUE(at::equal(a->params.zero_point, b->params.zero_point)) << c.name << ", block " << block;
    }
  }
}

TEST(GptqTensorOpsTest, DeadInputsAndExtraDampingAsTheCpuPath) {
  // Fewer tokens than inputs and a few inputs no token reaches: singular, retried with more damping.
  const int64_t k = 128;
  std::vector<at::Tensor> batches = MakeInputs(k, {40}, 5);
  batches[0].select(2, 3).zero_();
  batches[0].select(2, 77).zero_();
  const at::Tensor h = HessianOf(batches, false);
  at::manual_seed(6);
  const at::Tensor weight = at::randn({64, k}) * 0.02;
  GptqOptions cpu;
  cpu.damp_percent = 1e-9;
  GptqOptions ops = cpu;
  ops.tensor_ops = true;
  const QuantSpec spec = IntSpec(DType::kInt4, true, -1);
  auto a = GptqQuantizeWeight(weight, h.clone(), spec, cpu);
  auto b = GptqQuantizeWeight(weight, h.clone(), spec, ops);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  EXPECT_EQ(a->extra_damp, b->extra_damp);
  EXPECT_EQ(Differing(a->weight, b->weight), 0);
  EXPECT_EQ(b->weight.select(1, 3).abs().sum().item<float>(), 0);
  EXPECT_EQ(b->weight.select(1, 77).abs().sum().item<float>(), 0);
}

TEST(GptqTensorOpsTest, BadInputsNameTheField) {
  const at::Tensor h = HessianOf(MakeInputs(64, {256}, 7), false);
  GptqOptions ops;
  ops.tensor_ops = true;
  auto factor = GptqFactorOf(h.clone(), ops);
  ASSERT_TRUE(factor.ok()) << factor.status();
  const QuantSpec spec = IntSpec(DType::kInt4, true, -1);
  auto wrong_width = GptqQuantizeByTensorOps(at::randn({8, 32}), *factor, spec, ops);
  EXPECT_NE(std::string(wrong_width.status().message()).find("hessian"), std::string::npos) << wrong_width.status();
  GptqOptions act = ops;
  act.act_order = true;
  auto wrong_order = GptqQuantizeByTensorOps(at::randn({8, 64}), *factor, spec, act);
  EXPECT_NE(std::string(wrong_order.status().message()).find("desc_act"), std::string::npos) << wrong_order.status();
  QuantSpec dynamic = spec;
  dynamic.is_dynamic = true;
  auto not_static = GptqQuantizeByTensorOps(at::randn({8, 64}), *factor, dynamic, ops);
  EXPECT_NE(std::string(not_static.status().message()).find("weight.is_dynamic"), std::string::npos);
  at::Tensor nan = h.clone();
  nan[1][2] = std::numeric_limits<float>::quiet_NaN();
  auto not_finite = GptqFactorByTensorOps(nan, ops);
  EXPECT_EQ(not_finite.status().code(), absl::StatusCode::kFailedPrecondition) << not_finite.status();
}

}  // namespace
}  // namespace quark::algorithms
