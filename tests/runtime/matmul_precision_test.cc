// bf16 products computed in float32 on CPUs without native bf16: mode resolution (QUARK_BF16_MATMUL and the
// cpuinfo flags), the exact arithmetic of each path, and bf16 layers and models against float32 ones.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/runtime/attention.h"
#include "core/runtime/layer_streamer.h"
#include "core/runtime/linear.h"
#include "core/runtime/matmul_precision.h"
#include "core/runtime/perplexity.h"
#include "tests/runtime/reference_model.h"
#include "tests/runtime/test_paths.h"

namespace quark::runtime {
namespace {

using ::testing::HasSubstr;

constexpr char kAvx2Flags[] = "flags\t\t: fpu vme sse sse2 avx avx2 fma bmi2 sha_ni";
constexpr char kBf16Flags[] = "flags\t\t: fpu avx2 avx512f avx512_bf16 avx512_vnni";
constexpr char kAmxFlags[] = "flags\t\t: fpu avx2 amx_bf16 amx_tile amx_int8";

// ||a - b|| / ||b||, in float64.
double RelativeError(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor ad = a.to(at::kDouble), bd = b.to(at::kDouble);
  return ((ad - bd).norm() / bd.norm()).item<double>();
}

class Bf16MatmulTest : public ::testing::Test {
 protected:
  void SetUp() override { testing::InitTestEngine(); }
  void TearDown() override { SetBf16MatmulForTest(std::nullopt); }
};

TEST(Bf16MatmulModeTest, ParsesTheOverride) {
  EXPECT_EQ(ParseBf16Matmul("native").value(), Bf16Matmul::kNative);
  EXPECT_EQ(ParseBf16Matmul("f32").value(), Bf16Matmul::kFloat32);
  const auto bad = ParseBf16Matmul("fast");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("QUARK_BF16_MATMUL"));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("\"fast\""));
}

TEST(Bf16MatmulModeTest, DetectsNativeBf16FromCpuFlags) {
  EXPECT_EQ(Bf16MatmulForCpuFlags(kAvx2Flags), Bf16Matmul::kFloat32);
  EXPECT_EQ(Bf16MatmulForCpuFlags(kBf16Flags), Bf16Matmul::kNative);
  EXPECT_EQ(Bf16MatmulForCpuFlags(kAmxFlags), Bf16Matmul::kNative);
  EXPECT_EQ(Bf16MatmulForCpuFlags(""), Bf16Matmul::kFloat32);
  // Whole flag names only.
  EXPECT_EQ(Bf16MatmulForCpuFlags("flags : avx512_bf16x xamx_bf16"), Bf16Matmul::kFloat32);
  EXPECT_EQ(Bf16MatmulForCpuFlags("flags : avx2 avx512_bf16"), Bf16Matmul::kNative);  // last on the line
}

TEST(Bf16MatmulModeTest, EnvironmentOverridesDetection) {
  EXPECT_EQ(ResolveBf16Matmul(nullptr, kAvx2Flags).value(), Bf16Matmul::kFloat32);
  EXPECT_EQ(ResolveBf16Matmul(nullptr, kBf16Flags).value(), Bf16Matmul::kNative);
  EXPECT_EQ(ResolveBf16Matmul("", kBf16Flags).value(), Bf16Matmul::kNative);  // set but empty = unset
  EXPECT_EQ(ResolveBf16Matmul("native", kAvx2Flags).value(), Bf16Matmul::kNative);
  EXPECT_EQ(ResolveBf16Matmul("f32", kBf16Flags).value(), Bf16Matmul::kFloat32);
  EXPECT_FALSE(ResolveBf16Matmul("bf16", kAvx2Flags).ok());
}

TEST_F(Bf16MatmulTest, EachPathComputesWhatItSays) {
  // Odd sizes: no path may depend on blocking multiples.
  const at::Tensor x = at::randn({1, 17, 67}).to(at::kBFloat16);
  const at::Tensor w = at::randn({33, 67}).to(at::kBFloat16);
  const at::Tensor b = at::randn({33}).to(at::kBFloat16);
  const at::Tensor widened = at::linear(x.to(at::kFloat), w.to(at::kFloat), b.to(at::kFloat)).to(at::kBFloat16);

  SetBf16MatmulForTest(Bf16Matmul::kFloat32);
  EXPECT_TRUE(MatmulInFloat32(x));
  EXPECT_FALSE(MatmulInFloat32(x.to(at::kFloat)));
  FloatLinear linear(w, b);
  const at::Tensor y = linear.forward(x);
  EXPECT_EQ(y.scalar_type(), at::kBFloat16);
  EXPECT_TRUE(at::equal(y, widened));
  EXPECT_TRUE(at::equal(linear.forward(x), widened));  // from the cached float32 weight
  EXPECT_TRUE(at::equal(ComputeLinear(x, w, b), widened));
  // A replaced weight is used, not the stale float32 copy.
  linear.set_weight(w * 2);
  EXPECT_TRUE(at::equal(linear.forward(x),
                        at::linear(x.to(at::kFloat), (w * 2).to(at::kFloat), b.to(at::kFloat)).to(at::kBFloat16)));

  SetBf16MatmulForTest(Bf16Matmul::kNative);
  EXPECT_FALSE(MatmulInFloat32(x));
  EXPECT_TRUE(at::equal(FloatLinear(w, b).forward(x), at::linear(x, w, b)));
  EXPECT_TRUE(at::equal(ComputeLinear(x, w, b), at::linear(x, w, b)));
}

TEST_F(Bf16MatmulTest, AttentionAgreesWithFloat32OnBothPaths) {
  const at::Tensor q = at::randn({1, 4, 37, 16}), k = at::randn({1, 2, 37, 16}), v = at::randn({1, 2, 37, 16});
  const at::Tensor mask = CausalMask(37, 5);
  const at::Tensor expected = CausalAttention(q, k, v, mask, 0.25);
  for (Bf16Matmul mode : {Bf16Matmul::kFloat32, Bf16Matmul::kNative}) {
    SetBf16MatmulForTest(mode);
    const at::Tensor out = CausalAttention(q.to(at::kBFloat16), k.to(at::kBFloat16), v.to(at::kBFloat16), mask, 0.25);
    EXPECT_EQ(out.scalar_type(), at::kBFloat16);
    EXPECT_LT(RelativeError(out, expected), 1e-2) << static_cast<int>(mode);
  }
}

// A bf16 decoder layer on the float32-compute path against the same layer in float32: bf16 rounding of the
// weights and of the activations between the steps (relative 2^-9 each) is all that separates them.
TEST_F(Bf16MatmulTest, Bf16LayerMatchesFloat32LayerToBf16Tolerance) {
  SetBf16MatmulForTest(Bf16Matmul::kFloat32);
  auto f32 = LayerStreamer::Open(testing::Stories260K(), {at::kFloat});
  auto bf16 = LayerStreamer::Open(testing::Stories260K(), {at::kBFloat16});
  ASSERT_TRUE(f32.ok() && bf16.ok());
  auto layer_f32 = (*f32)->model().LoadLayer(1);
  auto layer_bf16 = (*bf16)->model().LoadLayer(1);
  ASSERT_TRUE(layer_f32.ok() && layer_bf16.ok());
  const at::Tensor hidden = at::randn({1, 41, 64}).to(at::kBFloat16);
  const at::Tensor expected = (*layer_f32)->forward(hidden.to(at::kFloat), (*f32)->model().Context(41));
  const at::Tensor out = (*layer_bf16)->forward(hidden, (*bf16)->model().Context(41));
  EXPECT_EQ(out.scalar_type(), at::kBFloat16);
  EXPECT_LT(RelativeError(out, expected), 1e-2);
  EXPECT_LT((out.to(at::kFloat) - expected).abs().max().item<float>(), 0.05 * expected.abs().max().item<float>());
}

TEST_F(Bf16MatmulTest, Bf16ModelLogitsAndPerplexityFollowTheFloat64Reference) {
  SetBf16MatmulForTest(Bf16Matmul::kFloat32);
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 48; ++i) ids.push_back((i * 7919 + 13) % 512);
  auto streamer = LayerStreamer::Open(testing::Stories260K(), {at::kBFloat16});
  ASSERT_TRUE(streamer.ok());
  const at::Tensor id_tensor = at::tensor(ids, at::kLong).unsqueeze(0);
  auto hidden = (*streamer)->Run({id_tensor});
  ASSERT_TRUE(hidden.ok()) << hidden.status();
  EXPECT_EQ((*hidden)[0].scalar_type(), at::kBFloat16);
  auto logits = (*streamer)->model().Logits((*hidden)[0]);
  ASSERT_TRUE(logits.ok());
  const at::Tensor reference = testing::ReferenceLogits(testing::Stories260K(), ids);
  EXPECT_LT(RelativeError(logits->squeeze(0), reference), 3e-2);
  PerplexityOptions options;
  options.seq_len = 48;
  auto ppl = EvaluatePerplexity(**streamer, ids, options);
  ASSERT_TRUE(ppl.ok()) << ppl.status();
  const at::Tensor log_probs = at::log_softmax(reference, -1);
  double nll = 0;
  for (size_t t = 0; t + 1 < ids.size(); ++t) nll -= log_probs[t][ids[t + 1]].item<double>();
  EXPECT_NEAR(ppl->mean_nll, nll / (ids.size() - 1), 0.02 * nll / (ids.size() - 1));
}

}  // namespace
}  // namespace quark::runtime
