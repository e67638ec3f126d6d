// llm-compressor's imatrix_mse observer (imatrix_mse_observer.h): on an outlier twin layer (a few input channels
// x40-100 in the activations, the weight's columns divided by the same, so the float layer is unchanged) it lowers
// the layer's output error against plain MinMax; uniform importance is the unweighted MSE search; bad arguments
// are refused naming the field.
#include "core/numerics/imatrix_mse_observer.h"

#include <gtest/gtest.h>

#include <string>

#include "core/numerics/fake_quant.h"
#include "tests/algorithms/gptq_test_specs.h"

namespace quark {
namespace {

QuantSpec Uint4(int group_size) { return algorithms::testing::IntSpec(DType::kUInt4, false, group_size); }

struct TwinLayer {
  at::Tensor x;  // [T, K] activations with outlier channels
  at::Tensor w;  // [N, K] with those columns divided by the same factors
};

TwinLayer OutlierTwin(int64_t n, int64_t k, int64_t tokens, uint64_t seed) {
  at::manual_seed(seed);
  at::Tensor x = at::randn({tokens, k});
  at::Tensor w = at::randn({n, k});
  at::Tensor factor = at::ones({k});
  const at::Tensor outliers = at::randperm(k).slice(0, 0, 6);
  factor.index_put_({outliers}, at::rand({6}) * 60 + 40);  // x40 .. x100
  return {x * factor, w / factor};
}

double OutputError(const TwinLayer& layer, const at::Tensor& q) {
  return at::matmul(layer.x.to(at::kDouble), (layer.w - q).to(at::kDouble).t()).pow(2).sum().item<double>();
}

TEST(ImatrixMseObserverTest, LowersTheActivationWeightedErrorOnAnOutlierTwin) {
  for (int group : {0, 32}) {
    for (uint64_t seed : {1, 2, 3}) {
      const TwinLayer layer = OutlierTwin(64, 128, 256, seed);
      const QuantSpec spec = Uint4(group);
      auto minmax = ParamsOf(layer.w, spec, TensorRole::kWeight);
      ASSERT_TRUE(minmax.ok()) << minmax.status();
      const at::Tensor importance = layer.x.pow(2).mean(0);
      auto imatrix = ImatrixMseParams(layer.w, importance, spec);
      ASSERT_TRUE(imatrix.ok()) << imatrix.status();
      EXPECT_EQ(imatrix->scale.sizes(), minmax->scale.sizes());
      const at::Tensor q_minmax = *FakeQuantize(layer.w, spec, *minmax, TensorRole::kWeight);
      const at::Tensor q_imatrix = *FakeQuantize(layer.w, spec, *imatrix, TensorRole::kWeight);
      EXPECT_LT(OutputError(layer, q_imatrix), OutputError(layer, q_minmax)) << "group " << group << " seed " << seed;
    }
  }
}

TEST(ImatrixMseObserverTest, UniformImportanceIsThePlainSearch) {
  const TwinLayer layer = OutlierTwin(16, 64, 32, 4);
  const QuantSpec spec = Uint4(16);
  auto uniform = ImatrixMseParams(layer.w, at::full({64}, 3.0f), spec);
  auto plain = ImatrixMseParams(layer.w, at::Tensor(), spec);
  ASSERT_TRUE(uniform.ok() && plain.ok());
  EXPECT_TRUE(at::equal(uniform->scale, plain->scale));
  EXPECT_TRUE(at::equal(uniform->zero_point, plain->zero_point));
}

TEST(ImatrixMseObserverTest, BadArgumentsNameTheField) {
  const at::Tensor w = at::randn({8, 32});
  const auto message = [&](const at::Tensor& imp, const QuantSpec& spec, ImatrixMseOptions o) {
    auto r = ImatrixMseParams(w, imp, spec, o);
    EXPECT_FALSE(r.ok());
    return std::string(r.status().message());
  };
  ImatrixMseOptions o;
  EXPECT_EQ(message(at::ones({31}), Uint4(16), o).rfind("importance:", 0), 0u);
  EXPECT_EQ(message(-at::ones({32}), Uint4(16), o).rfind("importance:", 0), 0u);
  EXPECT_EQ(message(at::ones({32}), Uint4(12), o).rfind("group_size:", 0), 0u);
  o.grid = 0;
  EXPECT_EQ(message(at::ones({32}), Uint4(16), o).rfind("grid:", 0), 0u);
  o = {};
  o.maxshrink = 1.5;
  EXPECT_EQ(message(at::ones({32}), Uint4(16), o).rfind("maxshrink:", 0), 0u);
  o = {};
  o.norm = 0;
  EXPECT_EQ(message(at::ones({32}), Uint4(16), o).rfind("norm:", 0), 0u);
}

}  // namespace
}  // namespace quark
