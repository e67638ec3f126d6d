// gpt-oss (#32) through the engine's quantizers layer by layer, on the family's own forward (GptOssLogits):
//   RTN: LayerQuantizer::Apply on each layer, the plan built from the model's modules as the pipeline builds it
//   (estimate::GptOssModelShape): q/k/v/o and every expert's gate_up_proj and down_proj become QuantLinears under their
//   HF-style names with their biases; the router, its bias and the attention sinks stay float (not modules); the
//   logits move by what 4-bit weights cost, not more.
//   GPTQ: GptqQuantizeLayer on each layer with one step per input in forward order (GptOssLayerLinears' inputs), the
//   experts covered by the calibration top-up: on its calibration samples every layer's output is closer to the
//   float layer's than RTN's is.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/checkpoint/gpt_oss_layout.h"
#include "core/config/layer_plan.h"
#include "core/config/presets.h"
#include "core/estimate/gpt_oss_shape.h"
#include "core/quantize/layer_quantizer.h"
#include "core/runtime/gpt_oss_layer.h"
#include "core/runtime/gpt_oss_model.h"
#include "tests/runtime/gpt_oss_test_models.h"
#include "tests/quantize/gptq_vs_rtn.h"
#include "tests/runtime/test_paths.h"

namespace quark::quantize {
namespace {

LayerQuantizer Uint4Rtn(const checkpoint::GptOssConfig& config) {
  return testing::Uint4Wo32Rtn(estimate::GptOssModelShape(config, checkpoint::StDType::kF32).modules);
}

TEST(GptOssRtnTest, EveryLinearIsQuantizedUnderItsNameRouterAndSinksStayFloat) {
  runtime::testing::InitTestEngine();
  const runtime::testing::TinyGptOss model("rtn", 9);
  const checkpoint::GptOssConfig& config = model.config;
  const runtime::WeightSource& weights = *model.weights;
  const LayerQuantizer quantizer = Uint4Rtn(config);
  int64_t quantized = 0, linears = 0;
  const auto rtn = [&](runtime::DecoderLayer& layer) -> absl::Status {
    auto& gpt_oss = dynamic_cast<runtime::GptOssDecoderLayer&>(layer);
    const at::Tensor sinks = gpt_oss.self_attn->sinks().clone(), router = gpt_oss.moe->router().clone();
    auto installed = quantizer.Apply(layer, CalibratedParams{});
    if (!installed.ok()) return installed.status();
    quantized += static_cast<int64_t>(installed->size());
    linears += static_cast<int64_t>(layer.NamedLinears().size());
    for (const auto& named : layer.NamedLinears()) {
      EXPECT_NE(std::dynamic_pointer_cast<QuantLinear>(named.linear), nullptr) << named.name;
      EXPECT_TRUE(named.linear->bias().defined()) << named.name;  // every gpt-oss linear keeps its bias
    }
    EXPECT_TRUE(at::equal(gpt_oss.self_attn->sinks(), sinks));
    EXPECT_TRUE(at::equal(gpt_oss.moe->router(), router));
    return absl::OkStatus();
  };
  const at::Tensor ids = at::arange(3, 3 + 2 * 24, at::kLong).remainder(512).view({2, 24});
  auto float_logits = runtime::GptOssLogits(config, weights, ids, at::kFloat);
  ASSERT_TRUE(float_logits.ok()) << float_logits.status();
  auto rtn_logits = runtime::GptOssLogits(config, weights, ids, at::kFloat, rtn);
  ASSERT_TRUE(rtn_logits.ok()) << rtn_logits.status();
  // 3 layers of 4 attention linears + 8 experts x 2.
  EXPECT_EQ(linears, 3 * (4 + 16));
  EXPECT_EQ(quantized, linears);
  // Mean rather than max: the tiny model's router logits are nearly tied, so 4-bit weights flip some tokens' experts
  // (a discrete change at those tokens) without being wrong.
  const double moved = (*rtn_logits - *float_logits).abs().mean().item<double>();
  const double scale = float_logits->abs().mean().item<double>();
  EXPECT_GT(moved, 1e-3 * scale);  // the weights were quantized
  EXPECT_LT(moved, 0.25 * scale);  // by 4-bit RTN's error, not a broken layer
  std::cout << "uint4_wo_32 RTN: mean |logit change| " << moved << " of mean |logit| " << scale << ", max "
            << (*rtn_logits - *float_logits).abs().max().item<double>() << " of " << float_logits->abs().max().item<double>()
            << "\n";
}

TEST(GptOssGptqTest, EveryLayerIsCloserToTheFloatLayerThanRtnOnItsSamples) {
  runtime::testing::InitTestEngine();
  const runtime::testing::TinyGptOss model("gptq", 4);
  const checkpoint::GptOssConfig& config = model.config;
  const runtime::WeightSource& weights = *model.weights;
  const LayerQuantizer rtn = Uint4Rtn(config);

  at::manual_seed(5);
  const at::Tensor table = *weights.Get("model.embed_tokens.weight", at::kFloat);
  std::vector<at::Tensor> samples;
  for (int i = 0; i < 4; ++i) samples.push_back(at::embedding(table, at::randint(0, 512, {1, 32}, at::kLong)));
  const runtime::LayerContext context = runtime::GptOssLayerContext(config, 32, at::kFloat);
  for (int64_t i = 0; i < config.base.num_hidden_layers; ++i) {
    const auto load = [&]() -> std::shared_ptr<runtime::DecoderLayer> {
      return *runtime::GptOssDecoderLayer::Load(config, i, weights, at::kFloat);
    };
    const testing::LayerErrors errors = testing::GptqVsRtn(load, samples, context, checkpoint::GptOssLayerLinears(config), rtn, 8);
    std::cout << "layer " << i << ": |GPTQ - float| " << errors.gptq << ", |RTN - float| " << errors.rtn << "\n";
    EXPECT_LT(errors.gptq, errors.rtn) << "layer " << i;
    EXPECT_GT(errors.gptq, 0.0) << "layer " << i;
    // The next layer calibrates on the float model's hidden states.
    const auto float_layer = load();
    for (at::Tensor& x : samples) x = float_layer->forward(x, context);
  }
}

}  // namespace
}  // namespace quark::quantize
