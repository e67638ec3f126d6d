// GPTAQ and Qronos against AMD Quark's own code: tests/algorithms/data/quark_asymmetric_reference.safetensors holds
// seeded layer inputs (float and quantized-model, float16 values), a weight, and what Quark's Gptaq / Qronos classes
// computed from them in Debian trixie's torch 2.6 (tests/peers/quark_algorithms/make_reference.sh): their statistics
// and their uint4 g32 weights, with and without desc_act. The engine recomputes the statistics and the weights here.
#include <gtest/gtest.h>

#include <iostream>
#include <string>
#include <vector>

#include "core/algorithms/asymmetric_gptq.h"
#include "core/checkpoint/checkpoint_reader.h"
#include "core/runtime/tensor_view.h"
#include "tests/algorithms/blas_kernels.h"
#include "tests/algorithms/gptq_test_specs.h"

namespace quark::algorithms {
namespace {

class QuarkReference {
 public:
  QuarkReference() {
    auto reader = checkpoint::CheckpointReader::OpenFile(std::string(QUARK_ASYMMETRIC_TEST_DATA) +
                                                         "/quark_asymmetric_reference.safetensors");
    EXPECT_TRUE(reader.ok()) << reader.status();
    if (reader.ok()) reader_ = *std::move(reader);
  }
  at::Tensor Get(const std::string& name) const {
    auto ref = reader_->Get(name);
    EXPECT_TRUE(ref.ok()) << ref.status();
    auto t = runtime::LoadAs(*ref, at::kFloat);
    EXPECT_TRUE(t.ok()) << t.status();
    return t->clone();
  }

 private:
  std::unique_ptr<checkpoint::CheckpointReader> reader_;
};

constexpr int64_t kGroup = 32, kBlock = 32;

AsymmetricStats StatsOf(HessianMethod method, const QuarkReference& ref) {
  const at::Tensor x = ref.Get("float_inputs"), xq = ref.Get("quantized_inputs");
  AsymmetricStats stats(method, x.size(-1));
  for (int64_t b = 0; b < x.size(0); ++b) EXPECT_TRUE(stats.Add(xq.slice(0, b, b + 1), x.slice(0, b, b + 1)).ok());
  return stats;
}

// ||X W^T - X~ Q^T||^2 over the samples, in float64.
double OutputError(const QuarkReference& ref, const at::Tensor& q) {
  const at::Tensor x = ref.Get("float_inputs").to(at::kDouble), xq = ref.Get("quantized_inputs").to(at::kDouble);
  const at::Tensor w = ref.Get("weight").to(at::kDouble);
  return (at::matmul(x, w.t()) - at::matmul(xq, q.to(at::kDouble).t())).pow(2).sum().item<double>();
}

double RelativeDifference(const at::Tensor& a, const at::Tensor& b) {
  return ((a - b).abs().max() / b.abs().max()).item<double>();
}

class AsymmetricPeerTest : public ::testing::TestWithParam<HessianMethod> {};

TEST_P(AsymmetricPeerTest, StatisticsAreQuarks) {
  const QuarkReference ref;
  const std::string name = GetParam() == HessianMethod::kGptaq ? "gptaq" : "qronos";
  const AsymmetricStats stats = StatsOf(GetParam(), ref);
  // The same calls in the same order: bit for bit Quark's (torch 2.6 there, LibTorch 1.13 here, both on OpenBLAS
  // for these shapes) on the AVX-512 kernels the reference was made on, and within rounding of it on the others
  // (OpenBLAS's Haswell kernels on some AMD EPYCs: 2e-8 / 8e-8 apart; blas_kernels.h).
  const ::testing::AssertionResult bits = testing::BitForBitBlasKernels(testing::Verified::kAvx512);
  const double hessian = RelativeDifference(stats.hessian(), ref.Get(name + "_hessian"));
  const double cross = RelativeDifference(stats.cross(), ref.Get(name + "_cross"));
  EXPECT_LE(hessian, 1e-6);
  EXPECT_LE(cross, 1e-6);
  if (!bits) {
    std::cout << "Bits not compared (" << bits.message() << "): relative differences " << hessian << ", " << cross
              << "\n";
    return;
  }
  EXPECT_TRUE(at::equal(stats.hessian(), ref.Get(name + "_hessian"))) << hessian;
  EXPECT_TRUE(at::equal(stats.cross(), ref.Get(name + "_cross"))) << cross;
}

TEST_P(AsymmetricPeerTest, WeightsMatchQuarksOnItsStatistics) {
  const QuarkReference ref;
  const std::string name = GetParam() == HessianMethod::kGptaq ? "gptaq" : "qronos";
  const at::Tensor w = ref.Get("weight");
  for (bool act_order : {false, true}) {
    const std::string tag = name + (act_order ? "_desc_act" : "_in_order");
    AsymmetricOptions o;
    o.method = GetParam();
    o.alpha = GetParam() == HessianMethod::kGptaq ? 0.25 : 1e-3;
    o.gptq.block_size = kBlock;
    o.gptq.act_order = act_order;
    o.gptq.static_groups = true;
    auto ours = AsymmetricQuantizeWeight(w, ref.Get(name + "_hessian"), ref.Get(name + "_cross"),
                                         testing::IntSpec(DType::kUInt4, false, kGroup), o);
    ASSERT_TRUE(ours.ok()) << ours.status();
    const at::Tensor quark = ref.Get(tag + "_weight");
    EXPECT_TRUE(at::equal(ours->params.scale.to(at::kFloat), ref.Get(tag + "_scale"))) << tag;
    const int64_t differing = (ours->weight != quark).sum().item<int64_t>();
    const double ours_error = OutputError(ref, ours->weight), quark_error = OutputError(ref, quark);
    // The bar: output error within 0.1% of Quark's. Bit for bit Quark's weights where the BLAS splits the
    // GEMMs as Quark's single-threaded run did (0 of 2048 differ run directly here); under ctest's thread settings
    // Qronos's re-solve GEMMs sum otherwise and a few rounding ties flip (7 of 2048): at most 1% may differ.
    EXPECT_LE(differing, quark.numel() / 100) << tag;
    EXPECT_NEAR(ours_error, quark_error, 1e-3 * quark_error) << tag << ": " << differing << " weights differ";
    // And from the engine's own statistics.
    const AsymmetricStats stats = StatsOf(GetParam(), ref);
    auto own = AsymmetricQuantizeWeight(w, stats.hessian(), stats.cross(),
                                        testing::IntSpec(DType::kUInt4, false, kGroup), o);
    ASSERT_TRUE(own.ok()) << own.status();
    EXPECT_LE((own->weight != quark).sum().item<int64_t>(), quark.numel() / 100) << tag << " (own statistics)";
    EXPECT_NEAR(OutputError(ref, own->weight), quark_error, 1e-3 * quark_error) << tag << " (own statistics)";
  }
}

INSTANTIATE_TEST_SUITE_P(Methods, AsymmetricPeerTest,
                         ::testing::Values(HessianMethod::kGptaq, HessianMethod::kQronos),
                         [](const auto& info) { return info.param == HessianMethod::kGptaq ? "Gptaq" : "Qronos"; });

}  // namespace
}  // namespace quark::algorithms
