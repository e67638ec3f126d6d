// Hadamard matrices (Sylvester, Paley I/II over prime fields and GF(p^e), the tabulated 156 and 172), their
// decompositions n = k * 2^m, the refusals, and the orthonormal rotations built on them.
#include "core/algorithms/hadamard.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <vector>

namespace quark::algorithms {
namespace {

using ::testing::HasSubstr;

// Entries +-1 and H H^T = n I exactly (integer-valued float64 sums below 2^53 are exact in any order). Above 2048 the
// Gram matrix is checked on 128 rows spread over the matrix (first and last included), against all rows.
void ExpectHadamard(const at::Tensor& h, int64_t n) {
  ASSERT_EQ(h.scalar_type(), at::kDouble);
  ASSERT_EQ(h.sizes(), (std::vector<int64_t>{n, n}));
  EXPECT_TRUE(at::equal(h.abs(), at::ones({n, n}, at::kDouble))) << "n = " << n;
  at::Tensor rows = at::arange(n, at::kLong);
  if (n > 2048) rows = at::linspace(0, static_cast<double>(n - 1), 128, at::kDouble).round().to(at::kLong);
  const at::Tensor gram = h.index_select(0, rows).mm(h.t());
  const at::Tensor expected = at::eye(n, at::kDouble).index_select(0, rows) * static_cast<double>(n);
  EXPECT_TRUE(at::equal(gram, expected)) << "H H^T != n I for n = " << n;
}

void ExpectOrthonormal(const at::Tensor& r, int64_t n, const char* what) {
  ASSERT_EQ(r.scalar_type(), at::kDouble);
  ASSERT_EQ(r.sizes(), (std::vector<int64_t>{n, n}));
  const double error = (r.mm(r.t()) - at::eye(n, at::kDouble)).abs().max().item<double>();
  EXPECT_LE(error, 1e-12) << what << " n = " << n;
  const double error_t = (r.t().mm(r) - at::eye(n, at::kDouble)).abs().max().item<double>();
  EXPECT_LE(error_t, 1e-12) << what << " n = " << n;
}

TEST(HadamardTest, SylvesterForEveryPowerOfTwoUpTo8192) {
  for (int m = 0; m <= 13; ++m) {
    const int64_t n = int64_t{1} << m;
    absl::StatusOr<HadamardDecomposition> d = FindHadamardDecomposition(n);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->base_order, 1);
    EXPECT_EQ(d->power_of_two, m);
    EXPECT_EQ(d->construction, HadamardConstruction::kSylvester);
    absl::StatusOr<at::Tensor> h = HadamardMatrix(n);
    ASSERT_TRUE(h.ok()) << h.status();
    ExpectHadamard(*h, n);
  }
  // Sylvester's matrix is symmetric with a first row and column of ones.
  const at::Tensor h = *HadamardMatrix(16);
  EXPECT_TRUE(at::equal(h, h.t()));
  EXPECT_TRUE(at::equal(h[0], at::ones({16}, at::kDouble)));
}

// The base orders real models need, each alone and doubled, and real models' widths (k * 2^m up to 7168, among them
// the tabulated 172's largest multiple below 8192). Each base's every doubling up to 8192 took ~100 s of the suite
// for nothing new: a doubling is the Kronecker product with [[1, 1], [1, -1]], checked by the doubled orders.
TEST(HadamardTest, BaseOrdersOfRealModelsAndTheirMultiples) {
  for (int64_t k : {12, 20, 28, 36, 40, 44, 52, 60, 76, 108, 140, 148, 156, 172}) {
    for (int64_t n : {k, 2 * k}) {
      absl::StatusOr<at::Tensor> h = HadamardMatrix(n);
      ASSERT_TRUE(h.ok()) << h.status();
      ExpectHadamard(*h, n);
    }
  }
  for (int64_t n : {3584, 4864, 5120, 5504, 6144, 7168}) {
    absl::StatusOr<at::Tensor> h = HadamardMatrix(n);
    ASSERT_TRUE(h.ok()) << h.status();
    ExpectHadamard(*h, n);
  }
}

// Every multiple of 4 up to 600 that has a construction (Paley over GF(25), GF(27), GF(49), GF(81), GF(121),
// GF(125), GF(169), GF(243), ... among them), in full.
TEST(HadamardTest, EveryConstructibleOrderUpTo600) {
  std::vector<int64_t> missing;
  for (int64_t n = 4; n <= 600; n += 4) {
    if (!HasHadamard(n)) {
      missing.push_back(n);
      continue;
    }
    absl::StatusOr<at::Tensor> h = HadamardMatrix(n);
    ASSERT_TRUE(h.ok()) << h.status();
    ExpectHadamard(*h, n);
  }
  // Orders whose every k = n / 2^m needs a construction other than Paley (Williamson and others, not implemented).
  EXPECT_EQ(missing, (std::vector<int64_t>{92, 116, 184, 188, 232, 236, 260, 268, 292, 324, 356, 372, 376, 404, 412,
                                           428, 436, 452, 472, 476, 508, 520, 532, 536, 584, 596}));
}

TEST(HadamardTest, PrimePowerFieldsBuildPaleyMatrices) {
  // q = 25, 27, 49, 243: GF(p^e) with e = 2, 3, 2, 5.
  const std::vector<std::pair<int64_t, HadamardConstruction>> cases = {{52, HadamardConstruction::kPaleyII},
                                                                       {28, HadamardConstruction::kPaleyI},
                                                                       {100, HadamardConstruction::kPaleyII},
                                                                       {244, HadamardConstruction::kPaleyI}};
  for (const auto& [k, construction] : cases) {
    absl::StatusOr<HadamardDecomposition> d = FindHadamardDecomposition(k);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->base_order, k);
    EXPECT_EQ(d->power_of_two, 0);
    EXPECT_EQ(d->construction, construction) << k;
    absl::StatusOr<at::Tensor> base = HadamardBaseMatrix(k);
    ASSERT_TRUE(base.ok()) << base.status();
    ExpectHadamard(*base, k);
  }
}

struct Expected {
  int64_t n;
  int64_t k;
  int m;
  HadamardConstruction construction;
  int64_t q;
};

// The sizes of current models, too big to build here (27648 is 6 GB in float64): the decomposition and its base.
TEST(HadamardTest, LargeModelSizesDecomposeWithTheSmallestBase) {
  using C = HadamardConstruction;
  const std::vector<Expected> cases = {
      {3584, 28, 7, C::kPaleyI, 27},     {5120, 20, 8, C::kPaleyI, 19},    {11008, 172, 6, C::kTabulated, 0},
      {13824, 108, 7, C::kPaleyI, 107},  {14336, 28, 9, C::kPaleyI, 27},   {18944, 148, 7, C::kPaleyII, 73},
      {27648, 108, 8, C::kPaleyI, 107},  {4864, 76, 6, C::kPaleyII, 37},   {9984, 156, 6, C::kTabulated, 0},
      {53248, 52, 10, C::kPaleyII, 25},  {12288, 12, 10, C::kPaleyI, 11},  {40, 20, 1, C::kPaleyI, 19},
      {36, 36, 0, C::kPaleyII, 17},      {8, 1, 3, C::kSylvester, 0},      {2, 1, 1, C::kSylvester, 0},
      {1, 1, 0, C::kSylvester, 0},       {56, 28, 1, C::kPaleyI, 27},      {516, 516, 0, C::kPaleyII, 257},
      {24, 12, 1, C::kPaleyI, 11},       {10240, 20, 9, C::kPaleyI, 19},   {1 << 20, 1, 20, C::kSylvester, 0},
  };
  for (const Expected& e : cases) {
    EXPECT_TRUE(HasHadamard(e.n)) << e.n;
    absl::StatusOr<HadamardDecomposition> d = FindHadamardDecomposition(e.n);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->base_order, e.k) << e.n;
    EXPECT_EQ(d->power_of_two, e.m) << e.n;
    EXPECT_EQ(d->construction, e.construction) << e.n;
    EXPECT_EQ(d->q, e.q) << e.n;
    EXPECT_EQ(d->base_order << d->power_of_two, e.n);
    absl::StatusOr<at::Tensor> base = HadamardBaseMatrix(e.k);
    ASSERT_TRUE(base.ok()) << base.status();
    ExpectHadamard(*base, e.k);
  }
}

TEST(HadamardTest, RefusalsNameTheOrder) {
  for (int64_t n : {0, -4}) {
    absl::StatusOr<at::Tensor> h = HadamardMatrix(n);
    EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(h.status().message()), HasSubstr("n = " + std::to_string(n)));
    EXPECT_FALSE(HasHadamard(n));
  }
  for (int64_t n : {3, 6, 7, 1002, 172 * 3 + 2}) {
    absl::StatusOr<at::Tensor> h = HadamardMatrix(n);
    EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument) << n;
    EXPECT_THAT(std::string(h.status().message()), HasSubstr("n = " + std::to_string(n)));
    EXPECT_FALSE(HasHadamard(n));
  }
  for (int64_t n : {int64_t{92}, int64_t{116}, int64_t{184}, int64_t{188}}) {
    absl::StatusOr<at::Tensor> h = HadamardMatrix(n);
    EXPECT_EQ(h.status().code(), absl::StatusCode::kNotFound) << n;
    EXPECT_THAT(std::string(h.status().message()), HasSubstr("n = " + std::to_string(n)));
    EXPECT_FALSE(HasHadamard(n));
  }
  absl::StatusOr<at::Tensor> too_big = HadamardMatrix(kMaxRotationOrder * 2);
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(too_big.status().message()), HasSubstr(std::to_string(kMaxRotationOrder * 2)));
  EXPECT_TRUE(HasHadamard(kMaxRotationOrder * 2));

  // 40 = 20 * 2 is not a base order itself.
  absl::StatusOr<at::Tensor> base = HadamardBaseMatrix(40);
  EXPECT_EQ(base.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(base.status().message()), HasSubstr("k = 40"));

  for (int64_t n : {int64_t{0}, int64_t{-1}, kMaxRotationOrder + 1}) {
    for (RotationKind kind : {RotationKind::kHadamard, RotationKind::kRandom}) {
      absl::StatusOr<at::Tensor> r = RotationMatrix(n, kind, 0);
      EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << n;
      EXPECT_THAT(std::string(r.status().message()), HasSubstr("n = " + std::to_string(n)));
    }
  }
  absl::StatusOr<at::Tensor> r = RotationMatrix(92, RotationKind::kHadamard, 0);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("n = 92"));
  EXPECT_TRUE(RotationMatrix(92, RotationKind::kRandom, 0).ok());
}

TEST(HadamardTest, RotationsAreOrthonormal) {
  for (int64_t n : {1, 2, 12, 28, 52, 64, 156, 172, 1024, 1536}) {
    const at::Tensor h = *HadamardMatrix(n);
    const double scale = 1.0 / std::sqrt(static_cast<double>(n));
    absl::StatusOr<at::Tensor> plain = RotationMatrix(n, RotationKind::kHadamard, 7, /*random_signs=*/false);
    ASSERT_TRUE(plain.ok()) << plain.status();
    ExpectOrthonormal(*plain, n, "H / sqrt(n)");
    EXPECT_TRUE(at::equal(*plain, h * scale));

    absl::StatusOr<at::Tensor> randomized = RotationMatrix(n, RotationKind::kHadamard, 7);
    ASSERT_TRUE(randomized.ok()) << randomized.status();
    ExpectOrthonormal(*randomized, n, "diag(s) H^T / sqrt(n)");
    // Row i is s_i times column i of H, scaled.
    const at::Tensor signs = (*randomized / (h.t() * scale)).round();
    EXPECT_TRUE(at::equal(signs, signs.select(1, 0).unsqueeze(1).expand({n, n}))) << n;
    EXPECT_TRUE(at::equal(signs.abs(), at::ones({n, n}, at::kDouble))) << n;
    if (n >= 64) EXPECT_GT((signs.select(1, 0) < 0).sum().item<int64_t>(), 0) << n;
  }
  for (int64_t n : {1, 2, 17, 92, 1025}) {
    absl::StatusOr<at::Tensor> r = RotationMatrix(n, RotationKind::kRandom, 3);
    ASSERT_TRUE(r.ok()) << r.status();
    ExpectOrthonormal(*r, n, "random orthogonal");
  }
}

TEST(HadamardTest, SeedsAreDeterministic) {
  for (RotationKind kind : {RotationKind::kHadamard, RotationKind::kRandom}) {
    const at::Tensor a = *RotationMatrix(256, kind, 42);
    const at::Tensor b = *RotationMatrix(256, kind, 42);
    const at::Tensor c = *RotationMatrix(256, kind, 43);
    EXPECT_TRUE(at::equal(a, b));
    EXPECT_FALSE(at::equal(a, c));
  }
  EXPECT_TRUE(at::equal(RandomOrthogonal(100, 5), RandomOrthogonal(100, 5)));
  EXPECT_FALSE(at::equal(RandomOrthogonal(100, 5), RandomOrthogonal(100, 6)));
  // The global generator plays no part.
  at::manual_seed(1);
  const at::Tensor before = RandomOrthogonal(33, 9);
  at::manual_seed(2);
  EXPECT_TRUE(at::equal(before, RandomOrthogonal(33, 9)));
  // The QR sign fix: Q^T G = R has a positive diagonal for the Gaussian G drawn from the same seed.
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(9);
  const at::Tensor gaussian = at::randn({33, 33}, generator, at::TensorOptions().dtype(at::kDouble));
  EXPECT_TRUE((before.t().mm(gaussian).diagonal() > 0).all().item<bool>());
  EXPECT_EQ(RandomOrthogonal(0, 1).numel(), 0);
}

}  // namespace
}  // namespace quark::algorithms
