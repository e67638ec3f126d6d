// GPTQ over a decoder layer: shared Hessians equal separate ones, and Quark's sequential order (a module's inputs come
// from the layer with the earlier entries already quantized).
#include "core/algorithms/gptq_layer.h"

#include <gtest/gtest.h>

#include "tests/algorithms/synthetic_layer_fixture.h"

namespace quark::algorithms {
namespace {

QuantSpec Uint4Group32() {
  QuantSpec spec;
  spec.dtype = DType::kUInt4;
  spec.symmetric = false;
  spec.qscheme = QScheme::kPerGroup;
  spec.group_size = 32;
  spec.ch_axis = 1;
  return spec;
}

GptqTarget Target(const std::string& name, const std::string& input) { return {name, input, Uint4Group32()}; }

class GptqLayerTest : public ::testing::Test, protected quark::testing::SyntheticLlamaLayer {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(OpenSyntheticLlama(/*seed=*/3, /*count=*/3, [](int) { return 24; }));
  }

  absl::StatusOr<std::map<std::string, QuantParams>> Run(runtime::DecoderLayer& layer, const GptqLayerPlan& plan) {
    const LayerForward forward = [&](const at::Tensor& x) { Forward(layer, x); };
    return GptqQuantizeLayer(layer, samples_, forward, plan, GptqOptions{});
  }

  at::Tensor Weight(runtime::DecoderLayer& layer, const std::string& name) { return layer.FindLinear(name)->weight(); }
};

const std::vector<std::string> kInputs = {"input_layernorm", "self_attn", "post_attention_layernorm", "mlp.act_fn"};

GptqLayerPlan LlamaPlan() {
  GptqLayerPlan plan;
  plan.input_order = kInputs;
  plan.steps = {{Target("self_attn.k_proj", "input_layernorm")},
                {Target("self_attn.v_proj", "input_layernorm")},
                {Target("self_attn.q_proj", "input_layernorm")},
                {Target("self_attn.o_proj", "self_attn")},
                {Target("mlp.up_proj", "post_attention_layernorm")},
                {Target("mlp.gate_proj", "post_attention_layernorm")},
                {Target("mlp.down_proj", "mlp.act_fn")}};
  return plan;
}

// Modules that read the same input share its Hessian and the factor computed from it once.
TEST_F(GptqLayerTest, SharedHessiansAndFactorsEqualSeparateOnes) {
  auto shared_layer = Layer();
  ASSERT_TRUE(Run(*shared_layer, LlamaPlan()).ok());
  // The same plan with every module under an input name of its own: each gets its own capture pass.
  GptqLayerPlan separate = LlamaPlan();
  separate.input_order.clear();
  for (auto& step : separate.steps) {
    step[0].input = step[0].relative_name;
    separate.input_order.push_back(step[0].input);
  }
  // Forward order of the separate inputs: q, k, v read before o, etc.
  separate.input_order = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                          "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"};
  auto separate_layer = Layer();
  ASSERT_TRUE(Run(*separate_layer, separate).ok());
  for (const auto& step : LlamaPlan().steps) {
    const std::string& name = step[0].relative_name;
    EXPECT_TRUE(at::equal(Weight(*shared_layer, name), Weight(*separate_layer, name))) << name;
  }
}

TEST_F(GptqLayerTest, LaterModulesSeeTheEarlierOnesQuantized) {
  auto full = Layer();
  auto params = Run(*full, LlamaPlan());
  ASSERT_TRUE(params.ok()) << params.status();
  EXPECT_EQ(params->size(), 7u);
  // q/k/v first, then o on the partially quantized layer: the same o as the full run.
  GptqLayerPlan qkv = LlamaPlan(), o = LlamaPlan();
  qkv.steps.resize(3);
  o.steps = {o.steps[3]};
  auto staged = Layer();
  ASSERT_TRUE(Run(*staged, qkv).ok());
  ASSERT_TRUE(Run(*staged, o).ok());
  EXPECT_TRUE(at::equal(Weight(*full, "self_attn.o_proj"), Weight(*staged, "self_attn.o_proj")));
  // o alone on the float layer sees other inputs, so its result differs.
  auto alone = Layer();
  ASSERT_TRUE(Run(*alone, o).ok());
  EXPECT_FALSE(at::equal(Weight(*full, "self_attn.o_proj"), Weight(*alone, "self_attn.o_proj")));
  // Modules left out of the plan keep their float weights.
  auto untouched = Layer();
  EXPECT_TRUE(at::equal(Weight(*untouched, "mlp.down_proj"), Weight(*staged, "mlp.down_proj")));
}

TEST_F(GptqLayerTest, CancelStopsBetweenModules) {
  auto layer = Layer();
  int seen = 0;
  GptqLayerCallbacks callbacks;
  callbacks.on_module = [&](const std::string&, int, int) { ++seen; };
  callbacks.cancelled = [&] { return seen >= 2; };
  const LayerForward forward = [&](const at::Tensor& x) { Forward(*layer, x); };
  auto result = GptqQuantizeLayer(*layer, samples_, forward, LlamaPlan(), GptqOptions{}, callbacks);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(seen, 2);
}

TEST_F(GptqLayerTest, NoSamplesIsAClearError) {
  auto layer = Layer();
  const LayerForward forward = [&](const at::Tensor& x) { Forward(*layer, x); };
  auto result = GptqQuantizeLayer(*layer, {}, forward, LlamaPlan(), GptqOptions{});
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace quark::algorithms
