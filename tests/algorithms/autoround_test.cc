// AutoRound (#35 item 2): its fake-quantizer against the engine's round-to-nearest, the straight-through gradients,
// and the signed-gradient training on a decoder layer of the synthetic Llama (the loss falls below round to nearest,
// the weights end on the grid of the returned parameters, the kept values are the lowest-loss iteration's).
#include "core/algorithms/autoround.h"

#include <gtest/gtest.h>

#include "core/algorithms/autoround_qdq.h"
#include "core/numerics/fake_quant.h"
#include "tests/algorithms/synthetic_layer_fixture.h"

namespace quark::algorithms {
namespace {

QuantSpec Spec(DType dtype, bool symmetric, std::optional<int> group) {
  QuantSpec spec;
  spec.dtype = dtype;
  spec.symmetric = symmetric;
  spec.qscheme = group ? QScheme::kPerGroup : QScheme::kPerChannel;
  spec.group_size = group;
  spec.ch_axis = group ? 1 : 0;
  return spec;
}

// The engine's round to nearest with the min-max observer: what AutoRound starts from (V = 0, full ranges).
at::Tensor EngineRtn(const at::Tensor& w, const QuantSpec& spec) {
  auto params = ParamsOf(w, spec, TensorRole::kWeight);
  EXPECT_TRUE(params.ok()) << params.status();
  auto q = FakeQuantize(w, spec, *params);
  EXPECT_TRUE(q.ok()) << q.status();
  return *q;
}

class AutoRoundQdqTest : public ::testing::TestWithParam<QuantSpec> {};

// Sizes 1, 17 and 1025 rows; groups of 32 (and whole rows per channel).
TEST_P(AutoRoundQdqTest, StartsAtTheEnginesRoundToNearest) {
  const QuantSpec spec = GetParam();
  at::manual_seed(0);
  for (int64_t rows : {1, 17, 1025}) {
    const at::Tensor w = at::randn({rows, 96}) * 0.05;
    auto t = InitAutoRoundTensors(w, spec);
    ASSERT_TRUE(t.ok()) << t.status();
    const at::Tensor rtn = EngineRtn(w, spec);
    at::NoGradGuard no_grad;
    const at::Tensor mine = AutoRoundQdq(w, *t, spec);
    EXPECT_TRUE(at::equal(mine, rtn)) << "rows " << rows << " max diff " << (mine - rtn).abs().max().item<float>()
                                      << " differing " << at::ne(mine, rtn).sum().item<int64_t>();
    auto finished = FinishAutoRound(w, *t, spec);
    ASSERT_TRUE(finished.ok()) << finished.status();
    EXPECT_TRUE(at::equal(finished->weight, rtn)) << "rows " << rows;
  }
}

// The offsets move the rounding: v = +0.5 - tiny on a value just below .5 of a step rounds it up.
TEST_P(AutoRoundQdqTest, OffsetsMoveTheRoundingAndTheResultStaysOnTheGrid) {
  const QuantSpec spec = GetParam();
  at::manual_seed(1);
  const at::Tensor w = at::randn({17, 96}) * 0.05;
  auto t = InitAutoRoundTensors(w, spec);
  ASSERT_TRUE(t.ok());
  {
    at::NoGradGuard no_grad;
    t->value.copy_(at::rand_like(t->value) - 0.5);
    t->min_scale.fill_(0.9);
    t->max_scale.fill_(0.8);
  }
  auto finished = FinishAutoRound(w, *t, spec);
  ASSERT_TRUE(finished.ok()) << finished.status();
  auto again = FakeQuantize(finished->weight, spec, finished->params);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(at::equal(*again, finished->weight)) << "on the grid of its parameters";
  EXPECT_FALSE(at::equal(finished->weight, EngineRtn(w, spec)));
  at::NoGradGuard no_grad;
  EXPECT_TRUE(at::allclose(AutoRoundQdq(w, *t, spec), finished->weight, 0, 1e-6)) << "training grid = final grid";
}

// Straight-through rounding: the loss reaches V and both clipping factors.
TEST_P(AutoRoundQdqTest, GradientsReachTheOffsetsAndTheClippingFactors) {
  const QuantSpec spec = GetParam();
  at::manual_seed(2);
  const at::Tensor w = at::randn({17, 96}) * 0.05;
  auto t = InitAutoRoundTensors(w, spec);
  ASSERT_TRUE(t.ok());
  const at::Tensor x = at::randn({5, 96});
  const at::Tensor loss = (at::matmul(x, AutoRoundQdq(w, *t, spec).t()) - at::matmul(x, w.t())).pow(2).sum();
  loss.backward();
  for (const at::Tensor* p : {&t->value, &t->min_scale, &t->max_scale}) {
    ASSERT_TRUE(p->grad().defined());
    EXPECT_GT(p->grad().abs().sum().item<double>(), 0.0);
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, AutoRoundQdqTest,
                         ::testing::Values(Spec(DType::kUInt4, false, 32), Spec(DType::kInt4, true, 32),
                                           Spec(DType::kInt4, false, 32), Spec(DType::kUInt4, false, std::nullopt),
                                           Spec(DType::kInt8, true, std::nullopt), Spec(DType::kInt3, true, -1)));

TEST(AutoRoundQdqTest, GroupsThatDoNotDivideTheInputsAreRefused) {
  auto t = InitAutoRoundTensors(at::zeros({4, 100}), Spec(DType::kUInt4, false, 32));
  ASSERT_FALSE(t.ok());
  EXPECT_NE(std::string(t.status().message()).find("group_size: 32 does not divide the 100 inputs"), std::string::npos);
}

class AutoRoundLayerTest : public ::testing::Test, protected quark::testing::SyntheticLlamaLayer {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(OpenSyntheticLlama(/*seed=*/3, /*count=*/4, [](int) { return 24; }));
  }

  BlockForward Forward(runtime::DecoderLayer& layer) {
    return [this, &layer](const at::Tensor& x) { return SyntheticLlamaLayer::Forward(layer, x); };
  }

  std::vector<AutoRoundTarget> Targets() const {
    std::vector<AutoRoundTarget> out;
    for (const char* name : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                             "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"}) {
      out.push_back({name, Spec(DType::kUInt4, false, 32)});
    }
    return out;
  }

  // Output error of `layer` (as it is now) against the float layer's outputs.
  double OutputError(runtime::DecoderLayer& layer, const std::vector<at::Tensor>& reference) {
    double sum = 0, elements = 0;
    for (size_t i = 0; i < samples_.size(); ++i) {
      sum += (Forward(layer)(samples_[i]) - reference[i]).pow(2).sum().item<double>();
      elements += static_cast<double>(reference[i].numel());
    }
    return sum / elements;
  }
};

TEST_F(AutoRoundLayerTest, SignedGradientStepsBeatRoundToNearestOnTheLayerOutput) {
  auto layer = Layer();
  std::vector<at::Tensor> reference;
  for (const auto& s : samples_) reference.push_back(Forward(*layer)(s).detach());
  AutoRoundOptions options;
  options.iters = 40;
  options.lr = options.minmax_lr = 1.0 / 40;
  options.batch_size = 2;
  std::vector<double> losses;
  AutoRoundCallbacks callbacks;
  callbacks.on_iteration = [&](int, double loss) { losses.push_back(loss); };
  auto result = AutoRoundQuantizeLayer(*layer, samples_, Forward(*layer), Targets(), options, callbacks);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(losses.size(), 40u);
  EXPECT_EQ(result->params.size(), 7u);
  EXPECT_LT(result->best_loss, result->first_loss);
  EXPECT_EQ(result->best_loss, losses[result->best_iter]) << "the kept values are the lowest-loss iteration's";
  EXPECT_EQ(*std::min_element(losses.begin(), losses.end()), result->best_loss);
  EXPECT_GT(result->changed_roundings, 0);
  EXPECT_LT(result->changed_roundings, result->weights / 4);
  // Every weight on the grid of its parameters, and the whole layer closer to the float one than RTN's.
  for (const auto& target : Targets()) {
    const at::Tensor w = layer->FindLinear(target.relative_name)->weight();
    auto again = FakeQuantize(w, target.spec, result->params.at(layer->prefix() + target.relative_name));
    ASSERT_TRUE(again.ok());
    EXPECT_TRUE(at::equal(*again, w)) << target.relative_name;
  }
  const double autoround_error = OutputError(*layer, reference);
  auto rtn = Layer();
  for (const auto& target : Targets()) {
    auto linear = std::dynamic_pointer_cast<runtime::FloatLinear>(rtn->FindLinear(target.relative_name));
    linear->set_weight(EngineRtn(linear->weight(), target.spec));
  }
  EXPECT_LT(autoround_error, OutputError(*rtn, reference));
}

TEST_F(AutoRoundLayerTest, NotUseBestMseKeepsTheLastIterationsValues) {
  auto layer = Layer();
  AutoRoundOptions options;
  options.iters = 6;
  options.not_use_best_mse = true;
  std::vector<double> losses;
  AutoRoundCallbacks callbacks;
  callbacks.on_iteration = [&](int, double loss) { losses.push_back(loss); };
  auto result = AutoRoundQuantizeLayer(*layer, samples_, Forward(*layer), Targets(), options, callbacks);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->best_iter, 5);
  EXPECT_EQ(result->best_loss, losses.back());
}

TEST_F(AutoRoundLayerTest, BadOptionsAndTargetsAreNamed) {
  auto layer = Layer();
  AutoRoundOptions options;
  options.iters = 0;
  auto bad = AutoRoundQuantizeLayer(*layer, samples_, Forward(*layer), Targets(), options);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("iters: must be positive"), std::string::npos);
  options.iters = 2;
  auto unknown = AutoRoundQuantizeLayer(*layer, samples_, Forward(*layer), {{"mlp.nope", Spec(DType::kUInt4, false, 32)}},
                                        options);
  EXPECT_FALSE(unknown.ok());
  auto ragged = AutoRoundQuantizeLayer(*layer, samples_, Forward(*layer),
                                       {{"mlp.down_proj", Spec(DType::kUInt4, false, 48)}}, options);
  ASSERT_FALSE(ragged.ok());
  EXPECT_NE(std::string(ragged.status().message()).find("model.layers.0.mlp.down_proj.weight.group_size"),
            std::string::npos)
      << ragged.status();
  EXPECT_FALSE(AutoRoundQuantizeLayer(*layer, {}, Forward(*layer), Targets(), options).ok());
}

}  // namespace
}  // namespace quark::algorithms
