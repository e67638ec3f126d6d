// Module resolution (pattern -> type -> global, exclude), static vs dynamic activations, and the KV-cache scale,
// on the decoder layers of a small synthetic Llama with grouped-query attention.
#include "core/quantize/layer_quantizer.h"

#include <gtest/gtest.h>

#include "core/checkpoint/model_modules.h"
#include "core/config/presets.h"
#include "core/quantize/calibration_input.h"
#include "core/runtime/layer_streamer.h"
#include "tests/quantize/test_model.h"

namespace quark::quantize {
namespace {

QuantSpec Int8Tensor(bool dynamic = false) {
  QuantSpec s;
  s.dtype = DType::kInt8;
  s.is_dynamic = dynamic;
  return s;
}

class LayerQuantizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { dir_ = new std::string(testing::WriteSyntheticLlama()); }
  static void TearDownTestSuite() { delete dir_; }

  void Open() {
    auto streamer = runtime::LayerStreamer::Open(*dir_);
    ASSERT_TRUE(streamer.ok()) << streamer.status();
    streamer_ = *std::move(streamer);
  }
  LayerQuantizer MakeQuantizer(const Config& config) {
    auto modules = ListModelModules(*dir_);
    EXPECT_TRUE(modules.ok()) << modules.status();
    return LayerQuantizer(config, BuildLayerPlan(config, *modules));
  }
  std::shared_ptr<runtime::DecoderLayer> Layer(int64_t i) {
    auto layer = streamer_->model().LoadLayer(i);
    EXPECT_TRUE(layer.ok()) << layer.status();
    return *layer;
  }
  std::vector<at::Tensor> Inputs() {
    std::vector<at::Tensor> out;
    for (const auto& ids : SyntheticCalibrationSamples(streamer_->config(), 2, 16, 1)) {
      out.push_back(*streamer_->model().Embed(ids));
    }
    return out;
  }
  static std::shared_ptr<QuantLinear> Quant(runtime::DecoderLayer& layer, const std::string& name) {
    return std::dynamic_pointer_cast<QuantLinear>(layer.FindLinear(name));
  }

  static std::string* dir_;
  std::unique_ptr<runtime::LayerStreamer> streamer_;
};

std::string* LayerQuantizerTest::dir_ = nullptr;

TEST_F(LayerQuantizerTest, PatternThenTypeThenGlobalAndExclude) {
  Open();
  Config config;
  config.global_quant_config.weight = Int8Tensor();
  QuantSpec per_channel = Int8Tensor();
  per_channel.qscheme = QScheme::kPerChannel;
  per_channel.ch_axis = 0;
  config.layer_type_quant_config["Linear"].weight = per_channel;
  QuantSpec grouped;
  grouped.dtype = DType::kUInt4;
  grouped.symmetric = false;
  grouped.qscheme = QScheme::kPerGroup;
  grouped.group_size = 32;
  config.layer_quant_config.push_back({"*.down_proj", LayerQuantConfig{std::nullopt, std::nullopt, grouped, std::nullopt}});
  config.layer_quant_config.push_back({"*mlp*", LayerQuantConfig{std::nullopt, std::nullopt, Int8Tensor(), std::nullopt}});
  config.exclude = {"model.layers.1.mlp.*", "lm_head"};
  LayerQuantizer quantizer = MakeQuantizer(config);
  auto layer0 = Layer(0);
  ASSERT_TRUE(quantizer.Install(*layer0).ok());
  EXPECT_EQ(Quant(*layer0, "mlp.down_proj")->config().weight->dtype, DType::kUInt4);  // first pattern wins
  EXPECT_EQ(Quant(*layer0, "mlp.up_proj")->config().weight->qscheme, QScheme::kPerTensor);  // second pattern
  EXPECT_EQ(Quant(*layer0, "self_attn.q_proj")->config().weight->qscheme, QScheme::kPerChannel);  // type entry
  auto layer1 = Layer(1);
  ASSERT_TRUE(quantizer.Install(*layer1).ok());
  EXPECT_EQ(Quant(*layer1, "mlp.gate_proj"), nullptr);  // excluded: stays a float linear
  EXPECT_NE(Quant(*layer1, "self_attn.o_proj"), nullptr);
}

TEST_F(LayerQuantizerTest, StaticInputsAreCalibratedDynamicOnesAreNot) {
  Open();
  Config config;
  config.global_quant_config.weight = Int8Tensor();
  config.global_quant_config.input_tensors = Int8Tensor();
  config.layer_quant_config.push_back({"*o_proj", LayerQuantConfig{Int8Tensor(/*dynamic=*/true), std::nullopt,
                                                                   Int8Tensor(), std::nullopt}});
  LayerQuantizer quantizer = MakeQuantizer(config);
  auto layer = Layer(0);
  const auto inputs = Inputs();
  auto linears = quantizer.Calibrate(*layer, inputs, streamer_->model());
  ASSERT_TRUE(linears.ok()) << linears.status();
  EXPECT_EQ(linears->size(), 7u);
  auto q = Quant(*layer, "self_attn.q_proj");
  ASSERT_TRUE(q->input_quantizer()->is_static());
  ASSERT_NE(q->input_quantizer()->params(), nullptr);
  EXPECT_GT(q->input_quantizer()->params()->scale.item<float>(), 0.0f);
  auto o = Quant(*layer, "self_attn.o_proj");
  EXPECT_FALSE(o->input_quantizer()->is_static());
  EXPECT_EQ(o->input_quantizer()->params(), nullptr);
  const CalibratedParams params = SnapshotParams(*linears);
  EXPECT_EQ(params.count("model.layers.0.self_attn.o_proj"), 0u);  // nothing static: nothing to keep or export
  // Re-applying the snapshot gives the same fake-quantized layer.
  const at::Tensor expected = layer->forward(inputs[0], streamer_->model().Context(16));
  auto again = Layer(0);
  ASSERT_TRUE(quantizer.Apply(*again, params).ok());
  EXPECT_TRUE(at::equal(again->forward(inputs[0], streamer_->model().Context(16)), expected));
}

TEST_F(LayerQuantizerTest, KvCacheScaleIsTheMaxOfKAndVAndAtLeastMinKvScale) {
  Open();
  auto preset = PresetConfig("fp8");
  ASSERT_TRUE(preset.ok());
  Config config = *preset;
  ASSERT_TRUE(ApplyKvCacheDtype("fp8", config).ok());
  LayerQuantizer quantizer = MakeQuantizer(config);
  auto layer = Layer(0);
  const auto inputs = Inputs();
  auto linears = quantizer.Calibrate(*layer, inputs, streamer_->model());
  ASSERT_TRUE(linears.ok()) << linears.status();
  const float k = Quant(*layer, "self_attn.k_proj")->output_quantizer()->params()->scale.item<float>();
  const float v = Quant(*layer, "self_attn.v_proj")->output_quantizer()->params()->scale.item<float>();
  EXPECT_EQ(k, v);
  EXPECT_EQ(Quant(*layer, "self_attn.q_proj")->output_quantizer(), nullptr);

  // ShareKvCacheScales on known scales: max(k, v), floored at min_kv_scale.
  auto make = [&](const std::string& name, float scale) {
    QuantLinearOptions o;
    o.name = name;
    o.config.output_tensors = config.kv_cache_quant_config[0].config.output_tensors;
    o.weight = at::randn({4, 4});
    o.output_params = QuantParams{at::tensor(scale), at::zeros({}, at::kInt)};
    return *QuantLinear::Create(o);
  };
  std::vector<std::shared_ptr<QuantLinear>> pair = {make("model.layers.0.self_attn.k_proj", 0.25f),
                                                    make("model.layers.0.self_attn.v_proj", 0.5f)};
  ASSERT_TRUE(ShareKvCacheScales(pair, config).ok());
  EXPECT_FLOAT_EQ(pair[0]->output_quantizer()->params()->scale.item<float>(), 0.5f);
  EXPECT_FLOAT_EQ(pair[1]->output_quantizer()->params()->scale.item<float>(), 0.5f);
  config.min_kv_scale = 2.0f;
  ASSERT_TRUE(ShareKvCacheScales(pair, config).ok());
  EXPECT_FLOAT_EQ(pair[0]->output_quantizer()->params()->scale.item<float>(), 2.0f);
}

TEST_F(LayerQuantizerTest, WeightOnlyHasNoActivationQuantizers) {
  Open();
  auto preset = PresetConfig("uint4_wo_32");
  ASSERT_TRUE(preset.ok());
  LayerQuantizer quantizer = MakeQuantizer(*preset);
  auto layer = Layer(0);
  auto linears = quantizer.Calibrate(*layer, {}, streamer_->model());  // needs no calibration data
  ASSERT_TRUE(linears.ok()) << linears.status();
  for (const auto& q : *linears) {
    EXPECT_EQ(q->input_quantizer(), nullptr);
    EXPECT_TRUE(q->frozen());
    auto codes = q->ExportWeight();
    ASSERT_TRUE(codes.ok()) << codes.status();
    EXPECT_LE(codes->codes.max().item<int>(), 15);
  }
}

}  // namespace
}  // namespace quark::quantize
