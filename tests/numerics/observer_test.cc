// Observers against hand-computed ranges and histograms.
#include <gtest/gtest.h>

#include "core/numerics/histogram_observer.h"
#include "core/numerics/minmax_observer.h"
#include "core/numerics/observer.h"
#include "tests/numerics/test_util.h"

namespace quark {
namespace {

using testing::F32;
using testing::Spec;
using testing::ToVector;

TEST(ObserverTest, MinMaxRunsAcrossBatches) {
  auto obs = MakeObserver(Spec(DType::kInt8, QScheme::kPerChannel), TensorRole::kWeight);
  ASSERT_TRUE(obs.ok());
  ASSERT_TRUE((*obs)->Observe(F32({1, -2, 3, 4}).reshape({2, 2})).ok());
  ASSERT_TRUE((*obs)->Observe(F32({-5, 0, 0, 8}).reshape({2, 2})).ok());
  auto range = (*obs)->Range();
  ASSERT_TRUE(range.ok());
  EXPECT_EQ(ToVector(range->first), (std::vector<float>{-5, 0}));
  EXPECT_EQ(ToVector(range->second), (std::vector<float>{1, 8}));
  EXPECT_EQ((*obs)->batches(), 2);
  auto p = (*obs)->ComputeParams();
  EXPECT_FLOAT_EQ(p->scale[1].item<float>(), 8.0f / 127.5f);
  const absl::Status bad = (*obs)->Observe(F32({1, 2, 3}).reshape({3, 1}));
  EXPECT_EQ(bad.message(), "input: shape [3, 1] gives parameters [3], earlier batches gave [2]");
}

TEST(ObserverTest, StaticActivationPerTensorAndErrors) {
  auto obs = MakeObserver(Spec(DType::kInt8), TensorRole::kActivation);
  EXPECT_FALSE((*obs)->ComputeParams().ok());
  QuantSpec dynamic = Spec(DType::kInt8);
  dynamic.is_dynamic = true;
  EXPECT_EQ(MakeObserver(dynamic, TensorRole::kActivation).status().message(),
            "is_dynamic: dynamic tensors are not observed");
  QuantSpec pct = Spec(DType::kInt8, QScheme::kPerChannel);
  pct.observer = ObserverKind::kPercentile;
  EXPECT_EQ(MakeObserver(pct, TensorRole::kWeight).status().message(),
            "observer: percentile supports per_tensor only, not per_channel");
}

TEST(ObserverTest, PercentileSymmetricHandComputed) {
  QuantSpec spec = Spec(DType::kInt8);
  spec.observer = ObserverKind::kPercentile;
  // |x| over [0, 4200] in 4200 bins of width 1; zeros skipped: 1 -> bin 1, 2 -> bin 2, 4200 -> bin 4199.
  const at::Tensor x = F32({0, 0, 1, -2, 4200});
  PercentileObserver obs(spec);
  ASSERT_TRUE(obs.Observe(x).ok());
  auto range = obs.Range();
  EXPECT_EQ(ToVector(range->first)[0], 0.0f);
  EXPECT_EQ(ToVector(range->second)[0], 4199.0f);  // CDF reaches 99.99999999% only at the last bin
  spec.percentile = 50.0;
  PercentileObserver half(spec);
  ASSERT_TRUE(half.Observe(x).ok());
  EXPECT_EQ(ToVector(half.Range()->second)[0], 2.0f);  // CDF 1/3, 2/3: left edge of bin 2
  auto p = half.ComputeParams();
  EXPECT_FLOAT_EQ(p->scale.item<float>(), 2.0f / 127.5f);
}

TEST(ObserverTest, PercentileAsymmetricTwoTails) {
  QuantSpec spec = Spec(DType::kUInt8, QScheme::kPerTensor, false);
  spec.observer = ObserverKind::kPercentile;
  spec.percentile = 50.0;  // tails of 25% each
  // Range [-10, 50], width 1/70: bins 0, 350, 1050, 1400, 2100, 2800, 3500, 4199.
  PercentileObserver obs(spec);
  ASSERT_TRUE(obs.Observe(F32({-10, -5, 5, 10, 20, 30, 40, 50})).ok());
  auto range = obs.Range();
  EXPECT_NEAR(ToVector(range->first)[0], -5.0f, 1e-5);   // CDF reaches 0.25 at bin 350
  EXPECT_NEAR(ToVector(range->second)[0], 30.0f, 1e-5);  // CDF reaches 0.75 at bin 2800
}

TEST(ObserverTest, HistogramRegrowsAcrossBatches) {
  GrowingHistogram h(4);
  h.Add({0.5f, 1.5f}, 0.0f, 2.0f);  // width 0.5: bins 1 and 3
  EXPECT_EQ(h.counts(), (std::vector<int64_t>{0, 1, 0, 1}));
  h.Add({3.9f}, 0.0f, 4.0f);  // width 1: old centres 0.75 -> 0, 1.75 -> 1; 3.9 -> 3
  EXPECT_EQ(h.counts(), (std::vector<int64_t>{1, 1, 0, 1}));
  EXPECT_EQ(h.total(), 3);
}

TEST(ObserverTest, MseKeepsTheBestOfTheLastThreeCentres) {
  QuantSpec spec = Spec(DType::kInt8);
  spec.observer = ObserverKind::kMse;
  // All mass in bin 2047 of [0, 8]: centre c = 2047.5 / 256. Clipping at c quantizes c to 127 * c / 127.5 (error
  // c / 255); clipping at the centres of bins 2046 / 2045 clamps c lower, with larger errors.
  MseObserver obs(spec);
  ASSERT_TRUE(obs.Observe(at::full({10}, 8.0f)).ok());
  auto range = obs.Range();
  ASSERT_TRUE(range.ok()) << range.status();
  EXPECT_EQ(ToVector(range->second)[0], 2047.5f / 256.0f);
  EXPECT_EQ(ToVector(range->first)[0], -2047.5f / 256.0f);
}

TEST(ObserverTest, MseRejectsDynamicAndPerGroup) {
  QuantSpec spec = Spec(DType::kInt8, QScheme::kPerGroup);
  spec.group_size = 32;
  spec.observer = ObserverKind::kMse;
  EXPECT_EQ(MakeObserver(spec, TensorRole::kWeight).status().message(),
            "observer: mse supports per_tensor only, not per_group");
}

}  // namespace
}  // namespace quark
