// DeepSeek-V3 (#32) through the engine's quantizers layer by layer, on the family's own forward (QuantizeModel on it:
// deepseek_pipeline_test):
//   RTN: LayerQuantizer::Apply on each streamed layer, the plan built from the model's modules as the pipeline builds
//   it: every linear of MLA, the dense MLP, the shared and the routed experts becomes a QuantLinear under its HF name,
//   the router stays float, and the logits move by what 4-bit weights cost, not more.
//   GPTQ: GptqQuantizeLayer on each layer with one step per input in forward order (DeepseekLayerLinears' inputs),
//   routed experts covered by the calibration top-up: on its calibration samples every layer's output is closer to the
//   float layer's than RTN's is.
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/deepseek_layout.h"
#include "core/config/layer_plan.h"
#include "core/config/presets.h"
#include "core/estimate/deepseek_shape.h"
#include "core/quantize/layer_quantizer.h"
#include "core/runtime/deepseek_layer.h"
#include "core/runtime/deepseek_model.h"
#include "core/runtime/deepseek_synthetic.h"
#include "core/runtime/synthetic_model.h"
#include "tests/runtime/deepseek_test_models.h"
#include "tests/quantize/gptq_vs_rtn.h"
#include "tests/runtime/test_paths.h"

namespace quark::quantize {
namespace {

LayerQuantizer Uint4Rtn(const checkpoint::DeepseekConfig& config) {
  return testing::Uint4Wo32Rtn(estimate::DeepseekModelShape(config, checkpoint::StDType::kF32).modules);
}

TEST(DeepseekRtnTest, EveryLinearIsQuantizedUnderItsNameAndTheLogitsStayClose) {
  runtime::testing::InitTestEngine();
  const runtime::testing::TinyDeepseek model("rtn", 9);
  const checkpoint::DeepseekConfig& config = model.config;
  const runtime::WeightSource& weights = *model.weights;

  const LayerQuantizer quantizer = Uint4Rtn(config);
  int64_t quantized = 0, linears = 0;
  const auto rtn = [&](runtime::DecoderLayer& layer) -> absl::Status {
    // Weight-only: nothing to calibrate, so Apply with no parameters installs and freezes (fake-quantized weights).
    auto installed = quantizer.Apply(layer, CalibratedParams{});
    if (!installed.ok()) return installed.status();
    quantized += static_cast<int64_t>(installed->size());
    linears += static_cast<int64_t>(layer.NamedLinears().size());
    for (const auto& named : layer.NamedLinears()) {
      EXPECT_NE(std::dynamic_pointer_cast<QuantLinear>(named.linear), nullptr) << named.name;
    }
    return absl::OkStatus();
  };
  const at::Tensor ids = at::arange(3, 3 + 2 * 24, at::kLong).remainder(512).view({2, 24});
  auto float_logits = runtime::DeepseekLogits(config, weights, ids, at::kFloat);
  ASSERT_TRUE(float_logits.ok()) << float_logits.status();
  auto rtn_logits = runtime::DeepseekLogits(config, weights, ids, at::kFloat, rtn);
  ASSERT_TRUE(rtn_logits.ok()) << rtn_logits.status();
  // 3 layers: (5 attention + 3 MLP) + 2 x (5 attention + 3 shared + 16 x 3 experts).
  EXPECT_EQ(linears, 8 + 2 * (8 + 48));
  EXPECT_EQ(quantized, linears);
  const double moved = (*rtn_logits - *float_logits).abs().max().item<double>();
  const double scale = float_logits->abs().max().item<double>();
  EXPECT_GT(moved, 1e-4 * scale);  // the weights were quantized
  EXPECT_LT(moved, 0.25 * scale);  // by 4-bit RTN's error, not a broken layer
  std::cout << "uint4_wo_32 RTN: max |logit change| " << moved << " of max |logit| " << scale << "\n";
}

TEST(DeepseekGptqTest, EveryLayerIsCloserToTheFloatLayerThanRtnOnItsSamples) {
  runtime::testing::InitTestEngine();
  const runtime::testing::TinyDeepseek model("gptq", 4);
  const checkpoint::DeepseekConfig& config = model.config;
  const runtime::WeightSource& weights = *model.weights;
  const LayerQuantizer rtn = Uint4Rtn(config);

  at::manual_seed(5);
  const at::Tensor table = *weights.Get("model.embed_tokens.weight", at::kFloat);
  std::vector<at::Tensor> samples;
  for (int i = 0; i < 4; ++i) samples.push_back(at::embedding(table, at::randint(0, 512, {1, 32}, at::kLong)));
  const runtime::LayerContext context = runtime::DeepseekLayerContext(config, 32, at::kFloat);
  for (int64_t i = 0; i < config.base.num_hidden_layers; ++i) {
    const auto load = [&]() -> std::shared_ptr<runtime::DecoderLayer> {
      return *runtime::DeepseekDecoderLayer::Load(config, i, weights, at::kFloat);
    };
    const testing::LayerErrors errors = testing::GptqVsRtn(load, samples, context, checkpoint::DeepseekLayerLinears(config, i), rtn, 8);
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
