// GPTAQ and Qronos on one weight (asymmetric_gptq.h): GPTAQ with no asymmetry is GPTQ bit for bit, both beat GPTQ on
// the asymmetric objective they are built for, Qronos's power iteration finds H's largest eigenvalue, and bad
// options and shapes are refused naming the field. Quark's own code checks the weights in
// asymmetric_gptq_peer_test.cc.
#include "core/algorithms/asymmetric_gptq.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/algorithms/gptq_tensor_ops.h"
#include "core/base/strings.h"
#include "core/numerics/fake_quant.h"
#include "tests/algorithms/gptq_test_specs.h"

namespace quark::algorithms {
namespace {

using testing::IntSpec;

// A float input X [1, T, K] with outlier channels, and the quantized model's X~ = X + a correlated drift.
struct Inputs {
  std::vector<at::Tensor> float_batches, quantized_batches;
};

Inputs MakeInputs(int64_t k, int batches, int64_t tokens, double drift, uint64_t seed) {
  at::manual_seed(seed);
  const at::Tensor channel_scale = at::exp(at::randn({k}) * 0.8);
  const at::Tensor mix = at::randn({k / 4, k});
  Inputs in;
  for (int b = 0; b < batches; ++b) {
    const at::Tensor x = (at::matmul(at::randn({tokens, k / 4}), mix) + 0.3 * at::randn({tokens, k})) * channel_scale;
    const at::Tensor noise = at::matmul(at::randn({tokens, k / 4}), mix) * channel_scale * drift;
    in.float_batches.push_back(x.unsqueeze(0));
    in.quantized_batches.push_back((x + noise).unsqueeze(0));
  }
  return in;
}

AsymmetricStats Stats(HessianMethod method, const Inputs& in) {
  AsymmetricStats stats(method, in.float_batches[0].size(-1));
  for (size_t b = 0; b < in.float_batches.size(); ++b) {
    EXPECT_TRUE(stats.Add(in.quantized_batches[b], in.float_batches[b]).ok());
  }
  return stats;
}

// ||X W^T - X~ Q^T||^2 over every batch: the error the quantized layer makes against the float target.
double AsymmetricError(const Inputs& in, const at::Tensor& w, const at::Tensor& q) {
  double sum = 0;
  for (size_t b = 0; b < in.float_batches.size(); ++b) {
    const at::Tensor target = at::matmul(in.float_batches[b].to(at::kDouble), w.to(at::kDouble).t());
    const at::Tensor got = at::matmul(in.quantized_batches[b].to(at::kDouble), q.to(at::kDouble).t());
    sum += (target - got).pow(2).sum().item<double>();
  }
  return sum;
}

AsymmetricOptions Options(HessianMethod method, bool act_order) {
  AsymmetricOptions o;
  o.method = method;
  o.alpha = method == HessianMethod::kQronos ? 1e-3 : 0.25;
  o.gptq.block_size = 32;
  o.gptq.act_order = act_order;
  o.gptq.static_groups = true;
  return o;
}

absl::StatusOr<GptqResult> Gptq(const at::Tensor& w, const at::Tensor& h, const QuantSpec& spec, bool act_order) {
  GptqOptions o;
  o.block_size = 32;
  o.act_order = act_order;
  o.static_groups = true;
  o.tensor_ops = true;
  return GptqQuantizeWeight(w, h.clone(), spec, o);
}

TEST(AsymmetricGptqTest, GptaqWithoutAsymmetryIsGptqBitForBit) {
  const Inputs in = MakeInputs(96, 3, 80, /*drift=*/0, 1);
  const AsymmetricStats stats = Stats(HessianMethod::kGptaq, in);
  EXPECT_EQ(stats.cross().abs().max().item<float>(), 0.0f);
  at::manual_seed(2);
  const at::Tensor w = at::randn({40, 96});
  for (bool act_order : {false, true}) {
    for (const QuantSpec& spec : {IntSpec(DType::kUInt4, false, 32), IntSpec(DType::kInt4, true, 0)}) {
      auto gptaq = AsymmetricQuantizeWeight(w, stats.hessian(), stats.cross(), spec,
                                            Options(HessianMethod::kGptaq, act_order));
      auto gptq = Gptq(w, stats.hessian(), spec, act_order);
      ASSERT_TRUE(gptaq.ok()) << gptaq.status();
      ASSERT_TRUE(gptq.ok()) << gptq.status();
      EXPECT_TRUE(at::equal(gptaq->weight, gptq->weight)) << "act_order " << act_order;
      EXPECT_TRUE(at::equal(gptaq->params.scale, gptq->params.scale));
    }
  }
}

// A weight's rows never mix: the whole weight gives what its row ranges give apart, across the lazy update's slabs of
// 512 rows (the GEMMs' rounding aside: other BLAS kernels may sum a slab of another shape otherwise).
TEST(AsymmetricGptqTest, RowsAreQuantizedAloneAcrossLazyUpdateSlabs) {
  const Inputs in = MakeInputs(96, 2, 80, /*drift=*/0.1, 4);
  at::manual_seed(5);
  const at::Tensor w = at::randn({1100, 96});
  for (const HessianMethod method : {HessianMethod::kGptaq, HessianMethod::kQronos}) {
    SCOPED_TRACE(method == HessianMethod::kGptaq ? "gptaq" : "qronos");
    const AsymmetricStats stats = Stats(method, in);
    const QuantSpec spec = IntSpec(DType::kUInt4, false, 32);
    const auto run = [&](const at::Tensor& rows) {
      auto result = AsymmetricQuantizeWeight(rows, stats.hessian(), stats.cross(), spec, Options(method, true));
      EXPECT_TRUE(result.ok()) << result.status();
      return result.ok() ? result->weight : at::Tensor();
    };
    const at::Tensor whole = run(w);
    const at::Tensor apart = at::cat({run(w.slice(0, 0, 600)), run(w.slice(0, 600))});
    EXPECT_GE((whole == apart).to(at::kDouble).mean().item<double>(), 0.999);
    EXPECT_NEAR(AsymmetricError(in, w, whole), AsymmetricError(in, w, apart), 1e-4 * AsymmetricError(in, w, apart));
  }
}

// q/k/v read one input: GPTAQ's factor of it, derived once and shared, gives each weight what its own run from (copies
// of) the statistics gives, bit for bit, on the host's in-place steps and in tensor operations.
TEST(AsymmetricGptqTest, OneGptaqFactorSharedByAnInputsReadersIsEachOnesOwn) {
  const Inputs in = MakeInputs(96, 2, 80, /*drift=*/0.1, 6);
  const AsymmetricStats stats = Stats(HessianMethod::kGptaq, in);
  at::manual_seed(7);
  const std::vector<at::Tensor> readers = {at::randn({40, 96}), at::randn({24, 96}).to(at::kBFloat16),
                                           at::randn({64, 96})};
  for (const bool tensor_ops : {false, true}) {
    SCOPED_TRACE(tensor_ops ? "tensor ops" : "in place");
    AsymmetricOptions o = Options(HessianMethod::kGptaq, /*act_order=*/true);
    o.gptq.tensor_ops = tensor_ops;
    const QuantSpec spec = IntSpec(DType::kUInt4, false, 32);
    auto factor = GptaqFactorOf(stats.hessian().clone(), stats.cross().clone(), o, at::kCPU);
    ASSERT_TRUE(factor.ok()) << factor.status();
    for (const at::Tensor& w : readers) {
      auto shared = GptaqQuantizeWeight(w, *factor, spec, o);
      auto own = AsymmetricQuantizeWeight(w, stats.hessian(), stats.cross(), spec, o);
      ASSERT_TRUE(shared.ok()) << shared.status();
      ASSERT_TRUE(own.ok()) << own.status();
      EXPECT_TRUE(at::equal(shared->weight, own->weight));
      EXPECT_TRUE(at::equal(shared->params.scale, own->params.scale));
      EXPECT_TRUE(at::equal(shared->params.zero_point, own->params.zero_point));
    }
    // A factor of another width is refused naming it.
    auto wrong = GptaqQuantizeWeight(at::randn({8, 64}), *factor, IntSpec(DType::kUInt4, false, 32), o);
    EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(wrong.status().message().find("factor: expected [64, 64]"), std::string::npos) << wrong.status();
  }
}

TEST(AsymmetricGptqTest, BothBeatGptqOnTheAsymmetricError) {
  const Inputs in = MakeInputs(128, 4, 96, /*drift=*/0.15, 3);
  at::manual_seed(4);
  const at::Tensor w = at::randn({48, 128});
  const QuantSpec spec = IntSpec(DType::kUInt4, false, 32);
  const AsymmetricStats gptaq_stats = Stats(HessianMethod::kGptaq, in);
  auto gptq = Gptq(w, gptaq_stats.hessian(), spec, true);
  ASSERT_TRUE(gptq.ok()) << gptq.status();
  const double gptq_error = AsymmetricError(in, w, gptq->weight);
  for (HessianMethod method : {HessianMethod::kGptaq, HessianMethod::kQronos}) {
    const AsymmetricStats stats = Stats(method, in);
    auto result = AsymmetricQuantizeWeight(w, stats.hessian(), stats.cross(), spec, Options(method, true));
    ASSERT_TRUE(result.ok()) << result.status();
    // On the grid of the returned parameters.
    auto again = FakeQuantize(result->weight, spec, result->params, TensorRole::kWeight);
    ASSERT_TRUE(again.ok());
    EXPECT_TRUE(at::equal(*again, result->weight));
    const double error = AsymmetricError(in, w, result->weight);
    EXPECT_LT(error, gptq_error) << (method == HessianMethod::kQronos ? "qronos" : "gptaq");
  }
}

// The host runs the K x K steps in place (LAPACK on the statistics' own memory); GptqOptions::tensor_ops runs
// LibTorch's calls on copies, as a GPU does. The same bits, with act order (the in-place permutation) and without,
// at a size where the Sherman-Morrison downdate runs in several row blocks. Handed-over statistics are worked on;
// statistics still held by the caller are left as they were.
TEST(AsymmetricGptqTest, InPlaceStepsGiveTheTensorOpsBits) {
  const Inputs in = MakeInputs(320, 2, 400, /*drift=*/0.1, 7);
  at::manual_seed(8);
  const at::Tensor w = at::randn({24, 320});
  const QuantSpec spec = IntSpec(DType::kUInt4, false, 32);
  for (HessianMethod method : {HessianMethod::kGptaq, HessianMethod::kQronos}) {
    for (bool act_order : {false, true}) {
      const std::string tag = StrCat(method == HessianMethod::kQronos ? "qronos" : "gptaq", " act_order ", act_order);
      AsymmetricOptions o = Options(method, act_order);
      o.gptq.tensor_ops = true;
      const AsymmetricStats shared = Stats(method, in);
      const at::Tensor h_before = shared.hessian().clone(), cross_before = shared.cross().clone();
      auto ops = AsymmetricQuantizeWeight(w, shared.hessian(), shared.cross(), spec, o);
      ASSERT_TRUE(ops.ok()) << ops.status();
      o.gptq.tensor_ops = false;
      auto kept = AsymmetricQuantizeWeight(w, shared.hessian(), shared.cross(), spec, o);
      ASSERT_TRUE(kept.ok()) << kept.status();
      EXPECT_TRUE(at::equal(shared.hessian(), h_before)) << tag;
      EXPECT_TRUE(at::equal(shared.cross(), cross_before)) << tag;
      AsymmetricStats handed = Stats(method, in);
      auto [hessian, cross] = handed.Release();
      EXPECT_FALSE(handed.hessian().defined());
      auto in_place = AsymmetricQuantizeWeight(w, std::move(hessian), std::move(cross), spec, o);
      ASSERT_TRUE(in_place.ok()) << in_place.status();
      for (const GptqResult* r : {&*kept, &*in_place}) {
        EXPECT_TRUE(at::equal(r->weight, ops->weight))
            << tag << ": " << (r->weight != ops->weight).sum().item<int64_t>() << " weights differ";
        EXPECT_TRUE(at::equal(r->params.scale, ops->params.scale)) << tag;
        EXPECT_TRUE(at::equal(r->params.zero_point, ops->params.zero_point)) << tag;
      }
    }
  }
}

// GPTAQ's and Qronos's column loops in fused blocks (kernels/element/gptq_row.h: GPTAQ's update row with its P term,
// Qronos's GPTQ loop on columns 1..) against their column-by-column loops: the same bits and parameters for every
// grid (integer groups and channels, fp8, MXFP4, NVFP4, W4A8, fp8 and integer tiles), with and without act order,
// in float32 and bfloat16, blocks of 32 (the last one short) and 100 (straddling groups), on the host's in-place
// steps and on tensor ops.
TEST(AsymmetricGptqTest, FusedBlocksAreTheColumnLoopsBitForBit) {
  const int64_t k = 192;
  const Inputs in = MakeInputs(k, 2, 300, /*drift=*/0.1, 11);
  at::manual_seed(12);
  const at::Tensor weight = at::randn({48, k}) * 0.05;
  const std::vector<std::pair<std::string, QuantSpec>> specs = {
      {"uint4 g32", IntSpec(DType::kUInt4, false, 32)}, {"int4 per channel", IntSpec(DType::kInt4, true, 0)},
      {"fp8 per channel", testing::Fp8PerChannel()},      {"mxfp4", testing::Mxfp4()},
      {"nvfp4", testing::Nvfp4()},                        {"w4a8", testing::W4A8()},
      {"fp8 tiles", testing::Fp8Tiles(24, 64)},           {"uint8 tiles", testing::Uint8Tiles(24, 64)},
  };
  for (HessianMethod method : {HessianMethod::kGptaq, HessianMethod::kQronos}) {
    const AsymmetricStats stats = Stats(method, in);
    for (const auto& [name, spec] : specs) {
      for (bool act_order : {false, true}) {
        for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
          for (int64_t block : {int64_t{32}, int64_t{100}}) {
            for (bool tensor_ops : {false, true}) {
              SCOPED_TRACE(StrCat(method == HessianMethod::kQronos ? "qronos " : "gptaq ", name, " act_order ",
                                  act_order, " ", c10::toString(dtype), " block ", block, " tensor_ops ", tensor_ops));
              AsymmetricOptions o = Options(method, act_order);
              o.gptq.block_size = block;
              o.gptq.tensor_ops = tensor_ops;
              const at::Tensor w = weight.to(dtype);
              auto fused = AsymmetricQuantizeWeight(w, stats.hessian(), stats.cross(), spec, o);
              o.gptq.fused_blocks = false;
              auto columns = AsymmetricQuantizeWeight(w, stats.hessian(), stats.cross(), spec, o);
              ASSERT_TRUE(fused.ok()) << fused.status();
              ASSERT_TRUE(columns.ok()) << columns.status();
              EXPECT_TRUE(fused->fused_blocks);
              EXPECT_FALSE(columns->fused_blocks);
              EXPECT_EQ((fused->weight != columns->weight).sum().item<int64_t>(), 0);
              EXPECT_TRUE(at::equal(at::signbit(fused->weight), at::signbit(columns->weight)));
              EXPECT_TRUE(at::equal(fused->params.scale, columns->params.scale));
              EXPECT_TRUE(at::equal(fused->params.zero_point, columns->params.zero_point));
            }
          }
        }
      }
    }
  }
}

// The statistics add each batch's product a slab of 1,024 rows at a time (no third K x K matrix): Quark's sums
// (asymmetric_gptq.h) up to the GEMMs' rounding, over two batches and a K of two slabs and a remainder.
TEST(AsymmetricGptqTest, StatisticsInSlabsOfRowsAreQuarksSums) {
  const int64_t k = 2100, tokens = 96;
  at::manual_seed(11);
  const std::vector<at::Tensor> xq = {at::randn({1, tokens, k}), at::randn({1, tokens, k})};
  std::vector<at::Tensor> x;
  for (const at::Tensor& q : xq) x.push_back(q + 0.1 * at::randn_like(q));
  for (const HessianMethod method : {HessianMethod::kGptaq, HessianMethod::kQronos}) {
    SCOPED_TRACE(method == HessianMethod::kGptaq ? "gptaq" : "qronos");
    AsymmetricStats stats(method, k);
    at::Tensor h = at::zeros({k, k}), cross = at::zeros({k, k});
    for (size_t b = 0; b < xq.size(); ++b) {
      ASSERT_TRUE(stats.Add(xq[b], x[b]).ok());
      // Quark's add_batch: the running means, the whole product at once.
      const double n = static_cast<double>(b + 1), keep = static_cast<double>(b) / n;
      at::Tensor q = xq[b].reshape({-1, k}).t(), f = x[b].reshape({-1, k}).t();
      h.mul_(keep);
      cross.mul_(keep);
      if (method == HessianMethod::kGptaq) {
        q = q.mul(std::sqrt(2.0 / n));
        f = f.mul(std::sqrt(2.0 / n));
        h.add_(q.matmul(q.t()));
        cross.add_((f - q).matmul(q.t()));
      } else {
        h.add_(q.matmul(q.t()).div(n));
        cross.add_(f.matmul(q.t()).div(n));
      }
    }
    for (const auto& [ours, quarks] : {std::pair{stats.hessian(), h}, std::pair{stats.cross(), cross}}) {
      const double scale = quarks.abs().max().item<double>();
      // Each element is the same dot product over the tokens as in Quark's one GEMM: on OpenBLAS's AVX-512 kernels
      // all four matrices are Quark's bit for bit (2026-12-04); asserted to rounding, as other kernels may split the
      // tokens otherwise for another shape.
      EXPECT_LE((ours - quarks).abs().max().item<double>(), 1e-6 * scale);
    }
  }
}

TEST(AsymmetricGptqTest, PowerIterationFindsTheLargestEigenvalue) {
  const AsymmetricStats stats = Stats(HessianMethod::kQronos, MakeInputs(64, 2, 200, 0.1, 5));
  const double largest = at::linalg_eigvalsh(stats.hessian().to(at::kDouble)).max().item<double>();
  EXPECT_NEAR(QronosLargestEigenvalue(stats.hessian()), largest, 1e-3 * largest);
}

TEST(AsymmetricGptqTest, BadInputsAreRefusedNamingTheField) {
  const AsymmetricStats stats = Stats(HessianMethod::kGptaq, MakeInputs(32, 1, 40, 0.1, 6));
  const at::Tensor w = at::randn({8, 32});
  const QuantSpec spec = IntSpec(DType::kUInt4, false, 16);
  const auto message = [&](const at::Tensor& weight, const at::Tensor& h, AsymmetricOptions o) {
    auto r = AsymmetricQuantizeWeight(weight, h, stats.cross(), spec, o);
    EXPECT_FALSE(r.ok());
    return std::string(r.status().message());
  };
  AsymmetricOptions o = Options(HessianMethod::kGptaq, false);
  EXPECT_NE(message(at::randn({8, 31}), stats.hessian(), o).find("hessian: expected [31, 31]"), std::string::npos);
  EXPECT_NE(message(w, stats.hessian().slice(0, 1), o).find("hessian:"), std::string::npos);
  o.alpha = -1;
  EXPECT_NE(message(w, stats.hessian(), o).find("alpha:"), std::string::npos);
  o = Options(HessianMethod::kQronos, false);
  o.beta = 0;
  EXPECT_NE(message(w, stats.hessian(), o).find("beta:"), std::string::npos);
  o = Options(HessianMethod::kGptaq, false);
  o.gptq.static_groups = false;
  EXPECT_NE(message(w, stats.hessian(), o).find("static_groups:"), std::string::npos);
  o.gptq.static_groups = true;
  o.gptq.damp_percent = 0;
  EXPECT_NE(message(w, stats.hessian(), o).find("damp_percent:"), std::string::npos);
  o.gptq.damp_percent = 0.01;
  at::Tensor bad = stats.hessian().clone();
  bad[3][5] = NAN;
  auto refused = AsymmetricQuantizeWeight(w, bad, stats.cross(), spec, o);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(refused.status().message()).find("hessian: has NaN or infinite"), std::string::npos)
      << refused.status();
  AsymmetricStats s(HessianMethod::kQronos, 32);
  EXPECT_FALSE(s.Add(at::randn({1, 4, 32}), at::randn({1, 5, 32})).ok());
  EXPECT_FALSE(s.Add(at::randn({1, 4, 31}), at::randn({1, 4, 31})).ok());
}

}  // namespace
}  // namespace quark::algorithms
