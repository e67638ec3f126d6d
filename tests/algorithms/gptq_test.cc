// GPTQ on one weight matrix against a straightforward reference of Quark's algorithm written here: one column at a
// time, no lazy blocks, Quark's own Cholesky path (cholesky -> cholesky_inverse -> upper cholesky).
#include "core/algorithms/gptq.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/algorithms/hessian.h"
#include "core/base/blas_threads.h"
#include "core/algorithms/linalg.h"
#include "core/config/presets.h"
#include "core/numerics/fake_quant.h"
#include "tests/algorithms/blas_kernels.h"
#include "tests/algorithms/gptq_test_layer.h"
#include "tests/algorithms/gptq_test_specs.h"
#include "tests/algorithms/hessian_bound.h"

namespace quark::algorithms {
namespace {

using testing::BitForBitBlasKernels;
using testing::Layer;
using testing::MakeLayer;
using testing::RelativeOutputError;
using testing::Verified;
using testing::WithinFloat32Bound;
using testing::Fp8PerChannel;
using testing::IntSpec;
using testing::Mxfp4;

// The algorithm as Quark writes it, unblocked.
at::Tensor ReferenceGptq(at::Tensor w, at::Tensor h, const QuantSpec& spec, const GptqOptions& o) {
  w = w.clone();
  h = h.clone();
  const int64_t k = w.size(1);
  const at::Tensor dead = h.diagonal() == 0;
  h.diagonal().masked_fill_(dead, 1);
  w.masked_fill_(dead.unsqueeze(0), 0);
  const bool grouped = spec.qscheme == QScheme::kPerGroup;
  const int64_t gs = grouped ? *spec.group_size : k;
  QuantSpec column_spec = spec;
  if (grouped) column_spec.group_size = 1;
  std::vector<QuantParams> groups;
  if (!grouped || o.static_groups) {
    for (int64_t g = 0; g < k; g += gs) groups.push_back(*ParamsOf(w.slice(1, g, g + gs).contiguous(), spec, TensorRole::kWeight));
  }
  const auto [perm, u] = testing::ReferenceOrderAndFactor(w, h, o);
  at::Tensor q = at::zeros_like(w);
  QuantParams current;
  for (int64_t j = 0; j < k; ++j) {
    const QuantParams* p;
    if (grouped && !o.static_groups) {
      if (j % gs == 0) current = *ParamsOf(w.slice(1, j, j + gs).contiguous(), spec, TensorRole::kWeight);
      p = &current;
    } else {
      p = &groups[static_cast<size_t>(perm[j].item<int64_t>() / gs)];
    }
    const at::Tensor col = *FakeQuantize(w.slice(1, j, j + 1).contiguous(), column_spec, *p);
    const at::Tensor err = (w.select(1, j) - col.squeeze(1)) / u[j][j];
    w.slice(1, j) -= at::outer(err, u[j].slice(0, j));
    q.select(1, j).copy_(col.squeeze(1));
  }
  return o.act_order ? q.index_select(1, at::argsort(perm)) : q;
}

void ExpectMatchesReference(const Layer& l, const QuantSpec& spec, GptqOptions o) {
  const at::Tensor reference = ReferenceGptq(l.weight, l.hessian, spec, o);
  for (int64_t block : {l.weight.size(1), int64_t{16}, int64_t{128}}) {
    o.block_size = block;
    auto result = GptqQuantizeWeight(l.weight, l.hessian, spec, o);
    ASSERT_TRUE(result.ok()) << result.status();
    if (block == l.weight.size(1)) {
      // One block: no lazy updates, every float operation the reference's, so every bit agrees.
      EXPECT_TRUE(at::equal(result->weight, reference)) << (result->weight != reference).sum().item<int64_t>()
                                                        << " values differ";
    } else {
      // Lazy updates sum in another order; GPTQ amplifies last-bit differences, so only the error is compared.
      const double ours = RelativeOutputError(l, result->weight), theirs = RelativeOutputError(l, reference);
      EXPECT_NEAR(ours, theirs, 0.01 * theirs) << "block " << block;
    }
    // Every value lies on the returned grid.
    auto again = FakeQuantize(result->weight, spec, result->params);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_TRUE(at::equal(*again, result->weight));
  }
}

TEST(GptqTest, MatchesReferencePerChannelSymmetric) {
  ExpectMatchesReference(MakeLayer(48, 256, 512, 1), IntSpec(DType::kInt4, true, -1), {});
}

TEST(GptqTest, MatchesReferencePerGroupAsymmetric) {
  for (int gs : {32, 128}) ExpectMatchesReference(MakeLayer(40, 256, 512, 2), IntSpec(DType::kUInt4, false, gs), {});
}

TEST(GptqTest, MatchesReferenceActOrderStaticGroups) {
  GptqOptions o;
  o.act_order = true;
  o.static_groups = true;
  for (int gs : {32, 128}) ExpectMatchesReference(MakeLayer(40, 256, 512, 3), IntSpec(DType::kUInt4, false, gs), o);
  ExpectMatchesReference(MakeLayer(40, 256, 512, 4), IntSpec(DType::kInt3, true, 64), o);
}

TEST(GptqTest, GroupsStartingInsideAnUpdatePanelSeeEveryEarlierUpdate) {
  // Groups of 24 and blocks of 100 start groups in the middle of the column loop's 16-column update panels: the
  // group's observation must see the updates of the panel's earlier columns, as Quark applies them at once.
  // (Blocked runs differ from the unblocked reference there by design: a group that runs past its block is observed
  // before the block's lazy update reaches its later columns, as in Quark.)
  const Layer l = MakeLayer(48, 192, 512, 11);
  const QuantSpec spec = IntSpec(DType::kUInt4, false, 24);
  GptqOptions o;
  o.block_size = 192;  // one block: every float operation the reference's
  auto result = GptqQuantizeWeight(l.weight, l.hessian, spec, o);
  ASSERT_TRUE(result.ok()) << result.status();
  const at::Tensor reference = ReferenceGptq(l.weight, l.hessian, spec, o);
  EXPECT_TRUE(at::equal(result->weight, reference)) << (result->weight != reference).sum().item<int64_t>()
                                                    << " values differ";
}

TEST(GptqTest, StaticGroupsWithoutActOrder) {
  GptqOptions o;
  o.static_groups = true;
  ExpectMatchesReference(MakeLayer(32, 128, 256, 5), IntSpec(DType::kInt8, true, 32), o);
}

TEST(GptqTest, BeatsRoundToNearestOnOutputError) {
  const Layer l = MakeLayer(64, 256, 1024, 6);
  for (const QuantSpec& spec : {IntSpec(DType::kUInt4, false, 32), IntSpec(DType::kInt4, true, 128),
                                IntSpec(DType::kInt3, true, -1)}) {
    auto result = GptqQuantizeWeight(l.weight, l.hessian, spec, {});
    ASSERT_TRUE(result.ok()) << result.status();
    const at::Tensor rtn = *FakeQuantizeDynamic(l.weight, spec);
    EXPECT_LT(RelativeOutputError(l, result->weight), 0.8 * RelativeOutputError(l, rtn));
  }
}

TEST(GptqTest, FloatAndMxWeightFormatsRun) {
  const Layer l = MakeLayer(32, 128, 256, 7);
  for (const QuantSpec& spec : {Fp8PerChannel(), Mxfp4()}) {
    auto result = GptqQuantizeWeight(l.weight, l.hessian, spec, {});
    ASSERT_TRUE(result.ok()) << result.status();
    auto again = FakeQuantize(result->weight, spec, result->params);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_TRUE(at::equal(*again, result->weight));
    EXPECT_LT(RelativeOutputError(l, result->weight), RelativeOutputError(l, *FakeQuantizeDynamic(l.weight, spec)));
  }
}

// Weight formats GPTQ's column loop cannot round are refused naming the field before any work: NVFP4 (group scales
// under a global scale the fused shards share), W4A8's two-stage weights, 128x128 blocks.
TEST(GptqTest, DeadInputsGetZeroWeights) {
  Layer l = MakeLayer(16, 64, 128, 8);
  l.inputs.select(1, 5).zero_();
  HessianAccumulator h(64);
  ASSERT_TRUE(h.Add(l.inputs).ok());
  auto result = GptqQuantizeWeight(l.weight, *std::move(h).Finish(), IntSpec(DType::kInt8, true, -1), {});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->weight.select(1, 5).abs().max().item<float>(), 0.0f);
  // With act order and static groups too, bit for bit the reference (which zeroes W's dead columns before taking the
  // group parameters), on one block.
  Layer dead = MakeLayer(16, 64, 128, 8);
  dead.inputs.select(1, 5).zero_();
  dead.inputs.select(1, 40).zero_();
  HessianAccumulator dead_h(64);
  ASSERT_TRUE(dead_h.Add(dead.inputs).ok());
  dead.hessian = *std::move(dead_h).Finish();
  GptqOptions o;
  o.act_order = true;
  o.static_groups = true;
  ExpectMatchesReference(dead, IntSpec(DType::kUInt4, false, 32), o);
}

TEST(GptqTest, CholeskyRetriesWithMoreDamping) {
  // Eigenvalues 3 and -1: not positive definite even after the standard damping.
  const at::Tensor h = at::tensor({1.0f, 2.0f, 2.0f, 1.0f}).view({2, 2});
  const at::Tensor w = at::tensor({0.3f, -0.7f, 0.1f, 0.4f}).view({2, 2});
  for (const bool fast : {false, true}) {
    GptqOptions o;
    o.fast_linalg = fast;
    // Each failed factorisation gives the matrix back as it was, so each retry damps the same matrix.
    auto result = GptqQuantizeWeight(w, h, IntSpec(DType::kInt8, true, -1), o);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_NEAR(result->extra_damp, 1.0, 1e-6);  // 0.01 (= |damp|), 0.1, then 1: eigenvalues 4.01 and 0.01
  }
  // A failed factorisation leaves the matrix bit for bit as it was, on a size with blocked LAPACK code paths.
  const Layer l = MakeLayer(4, 300, 200, 16);
  at::Tensor indefinite = l.hessian.clone();
  indefinite[150][150] = -1.0f;
  for (const bool fast : {false, true}) {
    at::Tensor work = indefinite.clone();
    ASSERT_FALSE(CholeskyStep(work, fast).ok());
    ASSERT_TRUE(work.defined());
    EXPECT_TRUE(at::equal(work, indefinite)) << "fast " << fast;
  }
  // Hopeless: no damping makes a NaN positive definite.
  const at::Tensor bad = at::tensor({1.0f, NAN, NAN, 1.0f}).view({2, 2});
  auto failed = GptqQuantizeWeight(w, bad, IntSpec(DType::kInt8, true, -1), {});
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kFailedPrecondition) << failed.status();
}

TEST(GptqTest, UpperCholeskyOfInverseIsQuarksFactor) {
  ASSERT_TRUE(BitForBitBlasKernels(Verified::kAvx2AndAvx512));  // the kernels these bits assume (blas_kernels.h)
  const Layer l = MakeLayer(4, 96, 300, 9);
  at::Tensor h = l.hessian.clone();
  h.diagonal().add_(0.01 * h.diagonal().mean().item<double>());
  const at::Tensor quark = at::linalg_cholesky(at::cholesky_inverse(at::linalg_cholesky(h)), true);
  auto exact = UpperCholeskyOfInverse(h);
  ASSERT_TRUE(exact.ok()) << exact.status();
  EXPECT_TRUE(at::equal(*exact, quark));
  // The reversed-matrix route: the same factor up to rounding.
  auto fast = UpperCholeskyOfInverse(h, /*fast=*/true);
  ASSERT_TRUE(fast.ok()) << fast.status();
  EXPECT_TRUE(at::allclose(*fast, quark, 1e-4, 1e-5)) << (*fast - quark).abs().max().item<float>();
  EXPECT_EQ(at::tril(*fast, -1).abs().max().item<float>(), 0.0f);
  EXPECT_FALSE(UpperCholeskyOfInverse(-h).ok());
  EXPECT_FALSE(UpperCholeskyOfInverse(-h, true).ok());
}

// Quark's factor at a size where OpenBLAS's LAPACK runs its blocked (and threaded) code paths: the direct LAPACK
// calls still give LibTorch's cholesky -> cholesky_inverse -> cholesky(upper) bit for bit.
TEST(GptqTest, UpperCholeskyOfInverseIsQuarksFactorOnBlockedSizes) {
  ASSERT_TRUE(BitForBitBlasKernels(Verified::kAvx2AndAvx512));  // the kernels these bits assume (blas_kernels.h)
  for (int64_t k : {int64_t{520}, int64_t{1031}}) {
    const Layer l = MakeLayer(4, k, k / 2, 11);  // fewer tokens than inputs: singular before damping, as in practice
    at::Tensor h = l.hessian.clone();
    h.diagonal().add_(0.01 * h.diagonal().mean().item<double>());
    const at::Tensor quark = at::linalg_cholesky(at::cholesky_inverse(at::linalg_cholesky(h)), true);
    auto exact = UpperCholeskyOfInverse(h);
    ASSERT_TRUE(exact.ok()) << exact.status();
    EXPECT_TRUE(at::equal(*exact, quark)) << "K = " << k << ": " << (*exact != quark).sum().item<int64_t>()
                                          << " values differ";
  }
}

// Qronos uses the inverse between the two halves of InverseFactorStep: each half in place is LibTorch's call bit for
// bit, with LibTorch's strides (so that the GEMMs after it get the same operands), and the upper factor reads the
// upper triangle only, as LibTorch's does, whichever way round its array is.
TEST(GptqTest, CholeskyInverseAndUpperStepsAreLibTorchsCalls) {
  ASSERT_TRUE(BitForBitBlasKernels(Verified::kAvx2AndAvx512));  // the kernels these bits assume (blas_kernels.h)
  for (int64_t k : {int64_t{96}, int64_t{520}}) {
    const Layer l = MakeLayer(4, k, k / 2, 17);
    at::Tensor h = l.hessian.clone();
    h.diagonal().add_(0.01 * h.diagonal().mean().item<double>());
    const at::Tensor lower = at::linalg_cholesky(h);
    const at::Tensor torch_inverse = at::cholesky_inverse(lower);
    at::Tensor work = h.clone();
    auto factor = CholeskyStep(work, /*fast=*/false);
    ASSERT_TRUE(factor.ok()) << factor.status();
    auto inverse = CholeskyInverseStep(*std::move(factor));
    ASSERT_TRUE(inverse.ok()) << inverse.status();
    EXPECT_TRUE(at::equal(*inverse, torch_inverse)) << "K = " << k;
    EXPECT_EQ(inverse->strides(), torch_inverse.strides()) << "K = " << k;
    // An elementwise result of the inverse (Qronos scales its downdated block), and a contiguous copy of it whose
    // lower triangle holds something else: only the upper triangle counts.
    const at::Tensor scaled = torch_inverse.mul(1e4);
    const at::Tensor torch_upper = at::linalg_cholesky(scaled, /*upper=*/true);
    at::Tensor skewed = scaled.clone(at::MemoryFormat::Contiguous);
    skewed.tril_(-1).mul_(3).add_(at::triu(scaled));
    for (const at::Tensor& m : {scaled.clone(), skewed}) {
      auto upper = UpperCholeskyStep(m.clone(), "scaled inverse");
      ASSERT_TRUE(upper.ok()) << upper.status();
      EXPECT_TRUE(at::equal(*upper, torch_upper)) << "K = " << k << ", contiguous " << m.is_contiguous();
      EXPECT_EQ(upper->strides(), torch_upper.strides()) << "K = " << k;
    }
    auto refused = UpperCholeskyStep(-scaled, "scaled inverse");
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(std::string(refused.status().message()).find("scaled inverse is not positive definite"),
              std::string::npos)
        << refused.status();
  }
}

// The column loop runs on ranges of rows in parallel. Rows never mix, so the result is the one-range result bit for
// bit, parameters included (groups observed as they start are observed per range and stacked back by rows; NVFP4's
// global scale is the whole weight's in every range; 2-D tiles are observed per range too). The lazy
// update's GEMMs run on fixed blocks of rows whatever the split, so this holds on AVX2 kernels too (#33 item 0: with
// one GEMM per range, 198 elements differed between 1 and 2 threads on Haswell/Zen kernels).
TEST(GptqTest, RowRangesInParallelGiveTheOneRangeResult) {
  BitForBitBlasKernels(Verified::kAnyKernel);  // records the kernels: the same GEMM calls on every kernel
  const Layer l = MakeLayer(1100, 256, 512, 12);  // > 2 x 256 rows: two ranges on two threads, with uneven sizes
  GptqOptions act_order;
  act_order.act_order = true;
  act_order.static_groups = true;
  GptqOptions fast;
  fast.fast_linalg = true;
  const std::vector<std::pair<QuantSpec, GptqOptions>> cases = {
      {IntSpec(DType::kUInt4, false, 32), {}},        // groups observed as they start, inside blocks
      {IntSpec(DType::kUInt4, false, 128), act_order},  // static groups, permuted columns
      {IntSpec(DType::kInt4, true, -1), fast},          // per channel, fast factor
      {testing::Nvfp4(), {}},                           // NVFP4 groups observed per range under one global scale
      {testing::Nvfp4(), act_order},                    // NVFP4 static groups, permuted columns
  };
  const int threads = at::get_num_threads();
  const auto expect_one_range_result = [](const Layer& layer, const QuantSpec& spec, const GptqOptions& options,
                                          std::initializer_list<int> more_threads) {
    at::set_num_threads(1);
    auto one = GptqQuantizeWeight(layer.weight, layer.hessian, spec, options);
    ASSERT_TRUE(one.ok()) << one.status();
    for (const int more : more_threads) {
      at::set_num_threads(more);
      auto two = GptqQuantizeWeight(layer.weight, layer.hessian, spec, options);
      ASSERT_TRUE(two.ok()) << two.status();
      EXPECT_TRUE(at::equal(one->weight, two->weight))
          << layer.weight.size(0) << " rows, " << more << " threads: "
          << (one->weight != two->weight).sum().item<int64_t>() << " elements differ";
      EXPECT_TRUE(at::equal(one->params.scale, two->params.scale));
      EXPECT_TRUE(at::equal(one->params.zero_point, two->params.zero_point));
      ASSERT_EQ(one->params.global_scale.defined(), two->params.global_scale.defined());
      if (one->params.global_scale.defined()) {
        EXPECT_TRUE(at::equal(one->params.global_scale, two->params.global_scale));
      }
      auto again = FakeQuantize(two->weight, spec, two->params);
      ASSERT_TRUE(again.ok()) << again.status();
      EXPECT_TRUE(at::equal(*again, two->weight));
    }
  };
  const Layer small = MakeLayer(300, 256, 512, 13);  // one range whose two row blocks run in parallel
  for (const Layer* layer : {&l, &small}) {
    for (const auto& [spec, options] : cases) {
      SCOPED_TRACE(layer->weight.size(0));
      expect_one_range_result(*layer, spec, options, {2, 3});  // 1100 rows: 512 + 588 rows, 256 + 512 + 332
    }
  }
  // 2-D tiles of 12 rows: ranges are whole tiles and whole update blocks, lcm(12, 256) = 768 rows, so 1,536 rows run
  // as two ranges on two or three threads (three ranges of 512 rows would cut tiles); each range observes its own
  // tiles as they start.
  const Layer tall = MakeLayer(1536, 256, 512, 14);
  expect_one_range_result(tall, testing::Fp8Tiles(12, 64), {}, {2, 3});
  expect_one_range_result(tall, testing::Uint8Tiles(12, 64), act_order, {2, 3});
  at::set_num_threads(threads);
}

// One factor serves every weight that reads the same input, with the bits of computing it again for each.
TEST(GptqTest, OneFactorServesEveryWeightOfAnInput) {
  const Layer l = MakeLayer(48, 256, 512, 14);
  at::manual_seed(15);
  const at::Tensor other = at::randn({24, 256}) * 0.05;
  for (const bool act_order : {false, true}) {
    GptqOptions o;
    o.act_order = act_order;
    o.static_groups = act_order;
    auto factor = GptqFactorOf(l.hessian, o);
    ASSERT_TRUE(factor.ok()) << factor.status();
    EXPECT_EQ(factor->perm.defined(), act_order);
    for (const auto& [weight, spec] : {std::pair{l.weight, IntSpec(DType::kUInt4, false, 32)},
                                       std::pair{other, IntSpec(DType::kInt8, true, -1)}}) {
      auto shared = GptqQuantizeWeight(weight, *factor, spec, o);
      auto alone = GptqQuantizeWeight(weight, l.hessian, spec, o);
      ASSERT_TRUE(shared.ok() && alone.ok()) << shared.status() << " " << alone.status();
      EXPECT_TRUE(at::equal(shared->weight, alone->weight));
      EXPECT_TRUE(at::equal(shared->params.scale, alone->params.scale));
    }
    // A factor made for the other column order is refused, naming the option.
    GptqOptions flipped = o;
    flipped.act_order = !act_order;
    flipped.static_groups = true;
    auto mismatch = GptqQuantizeWeight(l.weight, *factor, IntSpec(DType::kUInt4, false, 32), flipped);
    ASSERT_FALSE(mismatch.ok());
    EXPECT_NE(mismatch.status().message().find("desc_act"), std::string::npos) << mismatch.status();
  }
  // The Hessian's input width must match the weight's.
  auto factor = GptqFactorOf(l.hessian, {});
  ASSERT_TRUE(factor.ok());
  auto narrow = GptqQuantizeWeight(at::randn({8, 128}), *factor, IntSpec(DType::kInt8, true, -1), {});
  ASSERT_FALSE(narrow.ok());
  EXPECT_NE(narrow.status().message().find("hessian"), std::string::npos) << narrow.status();
  EXPECT_FALSE(GptqFactorOf(at::randn({3, 4}), {}).ok());
}

// GPTQ works on the weight in place only when nobody else holds it (the float copy of a bfloat16 weight): the
// caller's weight is never changed, in either dtype or column order.
TEST(GptqTest, TheCallersWeightIsLeftAlone) {
  const Layer l = MakeLayer(40, 128, 256, 16);
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    for (const bool act_order : {false, true}) {
      GptqOptions o;
      o.act_order = act_order;
      o.static_groups = act_order;
      const at::Tensor weight = l.weight.to(dtype);
      const at::Tensor before = weight.clone();
      auto result = GptqQuantizeWeight(weight, l.hessian, IntSpec(DType::kUInt4, false, 32), o);
      ASSERT_TRUE(result.ok()) << result.status();
      EXPECT_TRUE(at::equal(weight, before));
      EXPECT_EQ(result->weight.scalar_type(), dtype);
      EXPECT_FALSE(at::equal(result->weight, weight));
    }
  }
}

TEST(GptqTest, TriangleAndTransposeCopies) {
  at::manual_seed(13);
  const at::Tensor a = at::randn({131, 70});
  const at::Tensor columns = at::randperm(70, at::kLong);
  EXPECT_TRUE(at::equal(GatheredColumns(a, columns), a.index_select(1, columns)));
  EXPECT_TRUE(at::equal(GatheredColumns(a.t().contiguous().t(), columns), a.index_select(1, columns)));  // strided
  const at::Tensor s = at::randn({133, 133});
  at::Tensor from_lower = s.clone();
  CompleteSymmetric(from_lower, Triangle::kLower);
  EXPECT_TRUE(at::equal(from_lower, s.tril() + s.tril(-1).t()));
  at::Tensor from_upper = s.clone();
  CompleteSymmetric(from_upper, Triangle::kUpper);
  EXPECT_TRUE(at::equal(from_upper, s.triu() + s.triu(1).t()));
}

// The copies move bits: blocks of 8 x 8 through vector registers, element by element at the ragged edges, between
// arrays with strides of their own; gathers with permutations and selections (repeats), into a new array or in
// place; NaN payloads and -0.
TEST(GptqTest, TransposingCopiesKeepEveryBitAtEverySize) {
  const auto bits_equal = [](const at::Tensor& a, const at::Tensor& b) {
    return a.sizes() == b.sizes() && a.is_contiguous() && b.contiguous().view(at::kInt).equal(a.view(at::kInt));
  };
  for (const auto& [rows, columns] : {std::pair<int64_t, int64_t>{8, 8}, {64, 128}, {203, 149}, {1, 67}}) {
    at::manual_seed(rows * 1000 + columns);
    at::Tensor a = at::randn({rows, columns + 5});  // 5 columns of padding: the source's stride is not its width
    a.view(at::kInt).view(-1)[0] = 0x7FC01234;                                  // NaN with a payload
    a.view(at::kInt)[rows - 1][columns - 1] = static_cast<int>(0x80000000u);  // -0
    at::Tensor out = at::full({columns, rows + 3}, 7.0f);                     // 3 columns the copy must not touch
    TransposeBlock(a.data_ptr<float>(), columns + 5, rows, columns, out.data_ptr<float>(), rows + 3);
    EXPECT_TRUE(bits_equal(out.slice(1, 0, rows).contiguous(), a.slice(1, 0, columns).t().contiguous()))
        << rows << "x" << columns;
    EXPECT_TRUE(at::all(out.slice(1, rows) == 7.0f).item<bool>());
    const at::Tensor source = a.slice(1, 0, columns).contiguous();
    const at::Tensor perm = at::randperm(columns, at::kLong);
    EXPECT_TRUE(bits_equal(GatheredColumns(source, perm), source.index_select(1, perm)));
    const at::Tensor picked = at::randint(0, columns, {columns / 2 + 1}, at::kLong);  // repeats: no permutation
    EXPECT_TRUE(bits_equal(GatheredColumns(source, picked), source.index_select(1, picked)));
    at::Tensor in_place = source.clone();
    PermuteColumnsInPlace(in_place, perm);
    EXPECT_TRUE(bits_equal(in_place, source.index_select(1, perm)));
    PermuteColumnsInPlace(in_place, at::argsort(perm));  // and back
    EXPECT_TRUE(bits_equal(in_place, source));
    at::Tensor square = at::randn({columns, columns});
    square.view(at::kInt)[0][columns - 1] = 0x7FC01234;
    const at::Tensor expected = square.index_select(0, perm).index_select(1, perm);
    PermuteSymmetricInPlace(square, perm);
    EXPECT_TRUE(bits_equal(square, expected)) << columns;
  }
  // Sizes with one tile row, an odd and an even number of them (the rows are shared out in pairs), ragged edges.
  for (const int64_t n : {8, 64, 72, 130, 203, 330}) {
    at::manual_seed(n);
    at::Tensor s = at::randn({n, n});
    s.view(at::kInt)[n - 1][0] = static_cast<int>(0x80000000u);  // -0 below the diagonal, +0 above it
    s[0][n - 1] = 0.0f;
    const at::Tensor above = at::ones({n, n}, at::kBool).triu(1);
    for (const Triangle from : {Triangle::kLower, Triangle::kUpper}) {
      for (const Writes writes : {Writes::kAll, Writes::kOnlyDiffering}) {
        at::Tensor m = s.clone();
        CompleteSymmetric(m, from, writes);
        // at::where selects without arithmetic, so the expected bits keep -0 where the source triangle has it.
        const at::Tensor expected =
            from == Triangle::kLower ? at::where(above, s.t(), s) : at::where(above.t(), s.t(), s);
        EXPECT_TRUE(bits_equal(m, expected.contiguous())) << "n " << n;
        // Already symmetric: nothing changes.
        at::Tensor again = m.clone();
        CompleteSymmetric(again, from, writes);
        EXPECT_TRUE(bits_equal(again, m));
      }
    }
  }
}

TEST(GptqTest, BadInputsNameTheField) {
  const Layer l = MakeLayer(8, 64, 64, 10);
  GptqOptions o;
  o.act_order = true;  // without static groups
  auto r = GptqQuantizeWeight(l.weight, l.hessian, IntSpec(DType::kUInt4, false, 32), o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("static_groups"), std::string::npos) << r.status();
  o = {};
  o.damp_percent = 0;
  r = GptqQuantizeWeight(l.weight, l.hessian, IntSpec(DType::kInt8, true, -1), o);
  EXPECT_NE(std::string(r.status().message()).find("damp_percent"), std::string::npos) << r.status();
  r = GptqQuantizeWeight(l.weight, l.hessian.slice(0, 1), IntSpec(DType::kInt8, true, -1), {});
  EXPECT_NE(std::string(r.status().message()).find("hessian"), std::string::npos) << r.status();
  r = GptqQuantizeWeight(l.weight, l.hessian, IntSpec(DType::kUInt4, false, 48), {});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(r.status().message()).find("group_size"), std::string::npos) << r.status();
}

// The exact accumulation computes the lower triangle (in panels of GEMMs, or in one symmetric rank-k update when
// that sums as the threaded GEMM does) and mirrors it: the bits of Quark's add_batch with its full GEMM, over several
// batches, at sizes with several panels and token counts that split into uneven blocks, with one BLAS thread and
// with two (OpenBLAS's single-threaded and threaded GEMMs split the tokens differently). Those bits hold on
// OpenBLAS's AVX-512 kernels (blas_kernels.h); on any other kernels the test checks the float64 bound
// (hessian_bound.h) instead, and says so.
TEST(GptqTest, HessianIsQuarksAddBatchBitForBit) {
  const ::testing::AssertionResult bits = BitForBitBlasKernels(Verified::kAvx512);
  if (!bits) std::cout << "Bits not compared, float64 bound only: " << bits.message() << "\n";
  const int initial_threads = BlasThreads();
  for (const int threads : {1, 2}) {
    if (initial_threads == 0 && threads > 1) continue;  // no OpenBLAS: nothing to set
    SetBlasThreads(threads);
    for (const auto& [k, tokens] : {std::pair<int64_t, int64_t>{600, 300}, std::pair<int64_t, int64_t>{1100, 2049},
                                    std::pair<int64_t, int64_t>{520, 700}}) {
      at::manual_seed(k);
      const std::vector<at::Tensor> batches = {at::randn({1, tokens, k}) * at::exp(at::randn({k})),
                                               at::randn({2, tokens / 3, k})};
      HessianAccumulator accumulator(k);
      at::Tensor quark = at::zeros({k, k});
      int64_t n = 0;
      for (const at::Tensor& x : batches) {
        ASSERT_TRUE(accumulator.Add(x).ok());
        quark *= static_cast<double>(n) / static_cast<double>(n + x.size(0));
        n += x.size(0);
        const at::Tensor inp = std::sqrt(2.0 / static_cast<double>(n)) * x.reshape({-1, k}).t();
        quark += inp.matmul(inp.t());
      }
      auto h = std::move(accumulator).Finish();
      ASSERT_TRUE(h.ok());
      const ::testing::AssertionResult bound = WithinFloat32Bound(*h, quark, batches);
      EXPECT_TRUE(bound) << "K = " << k << ", " << threads << " BLAS threads";
      if (!bits) {
        std::cout << "K = " << k << ", " << threads << " BLAS threads: " << bound.message() << "\n";
        continue;
      }
      EXPECT_TRUE(at::equal(*h, quark)) << "K = " << k << ", " << tokens << " tokens, " << threads
                                        << " BLAS threads: " << (*h != quark).sum().item<int64_t>() << " differ";
    }
  }
  if (initial_threads > 0) SetBlasThreads(initial_threads);
}

// The first batch is written over the uninitialised sum, not added to zeros: the same bits, also when that first
// batch has no tokens, and on the fast path (the bits on AVX-512 kernels, the float64 bound on any).
TEST(GptqTest, HessianStartsFromItsFirstBatch) {
  const ::testing::AssertionResult bits = BitForBitBlasKernels(Verified::kAvx512);
  const int64_t k = 96;
  at::manual_seed(5);
  const at::Tensor empty = at::randn({1, 0, k}), x = at::randn({2, 40, k});
  HessianAccumulator accumulator(k);
  ASSERT_TRUE(accumulator.Add(empty).ok());
  ASSERT_TRUE(accumulator.Add(x).ok());
  at::Tensor quark = at::zeros({k, k});
  quark *= 1.0 / 3.0;  // Quark: the empty batch counts a sequence and adds nothing
  const at::Tensor inp = std::sqrt(2.0 / 3.0) * x.reshape({-1, k}).t();
  quark += inp.matmul(inp.t());
  auto h = std::move(accumulator).Finish();
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(WithinFloat32Bound(*h, quark, {empty, x}));
  if (bits) EXPECT_TRUE(at::equal(*h, quark));
  HessianAccumulator fast(k, /*fast=*/true);
  ASSERT_TRUE(fast.Add(x).ok());
  auto f = std::move(fast).Finish();
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(at::allclose(*f, at::matmul(x.reshape({-1, k}).t(), x.reshape({-1, k})) * (2.0 / 2.0), 1e-5, 1e-4));
  EXPECT_TRUE(at::equal(*f, f->t()));
}

TEST(GptqTest, HessianCountsSequences) {
  at::manual_seed(11);
  const at::Tensor a = at::randn({1, 10, 8}), b = at::randn({2, 10, 8});
  HessianAccumulator h(8);
  ASSERT_TRUE(h.Add(a).ok());
  ASSERT_TRUE(h.Add(b).ok());
  EXPECT_EQ(h.sequences(), 3);
  const at::Tensor x = at::cat({a.reshape({-1, 8}), b.reshape({-1, 8})});
  EXPECT_TRUE(at::allclose(*std::move(h).Finish(), at::matmul(x.t(), x) * (2.0 / 3.0), 1e-5, 1e-5));
  EXPECT_FALSE(h.Add(at::randn({3, 7})).ok());
  EXPECT_FALSE(HessianAccumulator(4).Finish().ok());
}

}  // namespace
}  // namespace quark::algorithms
