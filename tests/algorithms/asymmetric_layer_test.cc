// GPTAQ / Qronos over a decoder layer (asymmetric_layer.h): statistics (GPTAQ: the factor made from them) kept across
// true_sequential's entries that read one input are a new collection's numbers, and are collected again once a module
// upstream of that input changed.
#include "core/algorithms/asymmetric_layer.h"

#include <gtest/gtest.h>

#include "tests/algorithms/gptq_test_specs.h"
#include "tests/algorithms/synthetic_layer_fixture.h"

namespace quark::algorithms {
namespace {

GptqTarget AsymmetricTarget(const std::string& name, const std::string& input) {
  return {name, input, testing::IntSpec(DType::kUInt4, /*symmetric=*/false, 32)};
}

// samples_: the quantized model's layer inputs.
class AsymmetricLayerTest : public ::testing::TestWithParam<HessianMethod>,
                            protected quark::testing::SyntheticLlamaLayer {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(OpenSyntheticLlama(/*seed=*/5, /*count=*/3, [](int) { return 24; }));
    // The float model's layer input differs from the quantized model's (as after quantized layers).
    for (const at::Tensor& sample : samples_) float_.push_back(sample + 0.05 * at::randn_like(sample));
  }

  struct Run {
    std::shared_ptr<runtime::DecoderLayer> layer;
    int forwards = 0;  // layer forwards: captures (each stopped at its module) and the float stream's
  };
  Run Quantize(std::vector<std::vector<GptqTarget>> steps) {
    Run run;
    run.layer = Layer();
    const LayerForwardOutput forward = [&](const at::Tensor& x) {
      ++run.forwards;
      return Forward(*run.layer, x);
    };
    GptqLayerPlan plan;
    plan.input_order = {"input_layernorm", "self_attn", "post_attention_layernorm", "mlp.act_fn"};
    plan.steps = std::move(steps);
    AsymmetricOptions options;
    options.method = GetParam();
    options.alpha = GetParam() == HessianMethod::kGptaq ? 0.25 : 1e-3;
    options.gptq.static_groups = true;
    options.gptq.act_order = true;
    std::vector<at::Tensor> float_samples = float_;
    auto params = AsymmetricQuantizeLayer(*run.layer, samples_, float_samples, forward, plan, options);
    EXPECT_TRUE(params.ok()) << params.status();
    return run;
  }

  static at::Tensor Weight(const Run& run, const std::string& name) { return run.layer->FindLinear(name)->weight(); }

  std::vector<at::Tensor> float_;
};

const GptqTarget kK = AsymmetricTarget("self_attn.k_proj", "input_layernorm");
const GptqTarget kV = AsymmetricTarget("self_attn.v_proj", "input_layernorm");
const GptqTarget kQ = AsymmetricTarget("self_attn.q_proj", "input_layernorm");
const GptqTarget kO = AsymmetricTarget("self_attn.o_proj", "self_attn");
const GptqTarget kUp = AsymmetricTarget("mlp.up_proj", "post_attention_layernorm");
const GptqTarget kGate = AsymmetricTarget("mlp.gate_proj", "post_attention_layernorm");
const GptqTarget kDown = AsymmetricTarget("mlp.down_proj", "mlp.act_fn");

// true_sequential's seven entries give what one entry per input gives (each input collected once, before any of its
// readers is quantized), with that many captures: 2 x 3 samples per distinct input, then the float stream's 3.
TEST_P(AsymmetricLayerTest, KeptStatisticsAreANewCollectionsBitForBit) {
  const Run sequential = Quantize({{kK}, {kV}, {kQ}, {kO}, {kUp}, {kGate}, {kDown}});
  const Run per_input = Quantize({{kK, kV, kQ}, {kO}, {kUp, kGate}, {kDown}});
  for (const GptqTarget& t : {kK, kV, kQ, kO, kUp, kGate, kDown}) {
    EXPECT_TRUE(at::equal(Weight(sequential, t.relative_name), Weight(per_input, t.relative_name))) << t.relative_name;
  }
  EXPECT_EQ(per_input.forwards, 4 * 2 * 3 + 3);
  EXPECT_EQ(sequential.forwards, per_input.forwards);  // Quark's way collects seven times: 7 x 2 x 3 + 3
}

// o_proj is upstream of up_proj's and gate_proj's input: quantized between them, gate_proj's statistics are collected
// again (with o quantized, as when o comes first), not kept from up_proj's entry.
TEST_P(AsymmetricLayerTest, AnUpstreamModuleInBetweenStartsANewCollection) {
  const Run interleaved = Quantize({{kUp}, {kO}, {kGate}});
  const Run o_first = Quantize({{kO}, {kUp, kGate}});
  EXPECT_TRUE(at::equal(Weight(interleaved, kGate.relative_name), Weight(o_first, kGate.relative_name)));
  EXPECT_FALSE(at::equal(Weight(interleaved, kUp.relative_name), Weight(o_first, kUp.relative_name)));
  EXPECT_EQ(interleaved.forwards, 3 * 2 * 3 + 3);
}

INSTANTIATE_TEST_SUITE_P(Methods, AsymmetricLayerTest, ::testing::Values(HessianMethod::kGptaq, HessianMethod::kQronos),
                         [](const ::testing::TestParamInfo<HessianMethod>& info) {
                           return info.param == HessianMethod::kGptaq ? "Gptaq" : "Qronos";
                         });

}  // namespace
}  // namespace quark::algorithms
