// GPTAQ's P on the blocks of its triangles (gptaq_products.h) against Quark's two GEMMs, the flops the estimator
// charges for it and for Qronos's re-solve (asymmetric_gptq_cost.h), and RowMajorInPlace (linalg.h).
#include "core/algorithms/gptaq_products.h"

#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "core/algorithms/linalg.h"
#include "core/config/asymmetric_gptq_cost.h"

namespace quark::algorithms {
namespace {

constexpr double kGptaqAlpha = 0.25;

// A dXX-like matrix and the upper factor of an SPD matrix's inverse, as GPTAQ has them; `transposed` gives the factor
// as the in-place factorisations return it (the transposed view of a row-major array).
struct FactorAndCross {
  at::Tensor cross, upper;
};
FactorAndCross MakeFactorAndCross(int64_t k, bool transposed, uint64_t seed) {
  at::manual_seed(seed);
  const at::Tensor x = at::randn({2 * k + 8, k});
  at::Tensor h = x.t().matmul(x).div(2 * k + 8);
  h.diagonal().add_(0.1);
  at::Tensor upper = at::linalg_cholesky(at::cholesky_inverse(at::linalg_cholesky(h)), /*upper=*/true);
  upper = transposed ? upper.t().contiguous().t() : upper.contiguous();
  return {at::randn({k, k}).mul(0.01), upper};
}

// Quark's Gptaq.quantize: P = alpha * triu_1(dXX L) L^T with L = U^T.
at::Tensor QuarksP(const at::Tensor& cross, const at::Tensor& upper) {
  at::Tensor cross_l = cross.matmul(upper.t());
  cross_l.triu_(1).mul_(kGptaqAlpha);
  return cross_l.matmul(upper);
}

TEST(GptaqProductsTest, OneBlockIsQuarksTwoGemmsBitForBit) {
  for (const int64_t k : {int64_t{1}, int64_t{17}, int64_t{300}, kTriangularProductBlock}) {
    for (const bool transposed : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "K " << k << (transposed ? " transposed factor" : " row-major factor"));
      const FactorAndCross in = MakeFactorAndCross(k, transposed, 1);
      const at::Tensor expected = QuarksP(in.cross, in.upper);
      at::Tensor p = in.cross.clone();
      const void* memory = p.data_ptr();
      GptaqPInPlace(p, in.upper, kGptaqAlpha);
      EXPECT_EQ(p.data_ptr(), memory);
      EXPECT_TRUE(at::equal(p, expected));
    }
  }
}

// Past one block the sums are grouped by block: the product up to float32 rounding (against a float64 reference),
// strictly upper like Quark's (zero on and below the diagonal).
TEST(GptaqProductsTest, BlocksGiveQuarksProductUpToRounding) {
  for (const int64_t k : {kTriangularProductBlock + 1, int64_t{1100}, 3 * kTriangularProductBlock}) {
    for (const bool transposed : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "K " << k << (transposed ? " transposed factor" : " row-major factor"));
      const FactorAndCross in = MakeFactorAndCross(k, transposed, 2);
      const at::Tensor exact = QuarksP(in.cross.to(at::kDouble), in.upper.to(at::kDouble));
      const at::Tensor quark = QuarksP(in.cross, in.upper);
      at::Tensor p = in.cross.clone();
      GptaqPInPlace(p, in.upper, kGptaqAlpha);
      EXPECT_TRUE(at::equal(p.tril(), at::zeros_like(p)));
      const double scale = exact.abs().max().item<double>();
      ASSERT_GT(scale, 0);
      const double ours = (p.to(at::kDouble) - exact).abs().max().item<double>() / scale;
      const double quarks = (quark.to(at::kDouble) - exact).abs().max().item<double>() / scale;
      // Rounding alone: float32's sums over K terms, of the size Quark's own error has.
      EXPECT_LT(ours, 1e-5) << "Quark's two GEMMs: " << quarks;
      EXPECT_LT(ours, 10 * quarks + 1e-7);
    }
  }
}

TEST(GptaqProductsTest, FlopsAreTheBlocksMultiplied) {
  // One block: Quark's two K x K x K GEMMs.
  EXPECT_DOUBLE_EQ(GptaqPFlops(300), 4.0 * 300 * 300 * 300);
  // n whole blocks of b: each product sums 2 b^3 (J + 1)(n - J) over the block columns, n (n + 1)(n + 2) / 6 terms.
  const double b = static_cast<double>(kTriangularProductBlock);
  for (const int64_t n : {2, 3, 22}) {
    EXPECT_DOUBLE_EQ(GptaqPFlops(n * kTriangularProductBlock), 2 * 2.0 * b * b * b * n * (n + 1) * (n + 2) / 6) << n;
  }
  // A 7B down_proj's K = 11008: about a fifth of Quark's 4 K^3.
  const double k = 11008;
  EXPECT_LT(GptaqPFlops(11008), 0.21 * 4 * k * k * k);
  EXPECT_GT(GptaqPFlops(11008), 4 * k * k * k / 6);
}

TEST(GptaqProductsTest, QronosResolveTakesTheCheaperGrouping) {
  // q_proj-like (N = K): Quark's grouping; down_proj-like (N < K): rows first.
  EXPECT_FALSE(QronosResolvesRowsFirst(4096, 4096));
  EXPECT_FALSE(QronosResolvesRowsFirst(11008, 4096));
  EXPECT_TRUE(QronosResolvesRowsFirst(4096, 11008));
  const double n = 4096, k = 11008;
  EXPECT_DOUBLE_EQ(QronosResolveFlops(4096, 11008), 2 * n * (k - 1) * (k - 1) + 2 * n * k * (k - 1));
  EXPECT_DOUBLE_EQ(QronosResolveFlops(11008, 4096), 2 * 4096.0 * 4095 * 4095 + 2 * 11008.0 * 4096 * 4095);
  EXPECT_LT(QronosResolveFlops(4096, 11008), 2 * k * (k - 1) * (k - 1) + 2 * n * k * (k - 1));
}

TEST(LinalgTest, RowMajorInPlaceKeepsTheValuesInTheirOwnMemory) {
  for (const int64_t n : {1, 7, 64, 65, 200, 1100}) {
    SCOPED_TRACE(n);
    const at::Tensor values = at::randn({n, n});
    at::Tensor a = values.t().contiguous().t();  // the layout the in-place factorisations return
    ASSERT_EQ(n == 1, a.is_contiguous());
    const void* memory = a.data_ptr();
    RowMajorInPlace(a);
    EXPECT_TRUE(a.is_contiguous());
    EXPECT_EQ(a.data_ptr(), memory);
    EXPECT_TRUE(at::equal(a, values));
    RowMajorInPlace(a);  // already row-major: left as it is
    EXPECT_TRUE(at::equal(a, values));
  }
}

}  // namespace
}  // namespace quark::algorithms
