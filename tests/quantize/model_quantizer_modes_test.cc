// ModelQuantizer's config resolution (pattern beats type beats global, exclude wins, embeddings without an entry stay
// float), static vs dynamic activations, weight-only configs, frozen weight codes, and its preconditions.
#include "core/quantize/model_quantizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/container/moduledict.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include "core/numerics/fake_quant.h"
#include "core/quantize/quant_linear.h"

namespace quark::quantize {
namespace {

namespace nn = torch::nn;
using ::testing::HasSubstr;

QuantSpec Spec(DType dtype, QScheme scheme = QScheme::kPerTensor, bool dynamic = false) {
  QuantSpec s;
  s.dtype = dtype;
  s.qscheme = scheme;
  s.is_dynamic = dynamic;
  return s;
}

TEST(ModelQuantizerModesTest, PatternBeatsTypeBeatsGlobalExcludeWinsEmbeddingStaysFloat) {
  nn::Sequential model;
  model->push_back("emb", nn::Embedding(10, 8));
  model->push_back("a", nn::Linear(8, 8));
  model->push_back("b1", nn::Linear(8, 8));
  model->push_back("c", nn::Linear(8, 8));
  model->push_back("conv", nn::Conv2d(nn::Conv2dOptions(2, 2, 1)));
  Config config;
  config.global_quant_config.weight = Spec(DType::kInt8);
  config.layer_type_quant_config["Linear"].weight = Spec(DType::kInt8, QScheme::kPerChannel);
  config.layer_quant_config.push_back({"b*", LayerQuantConfig{std::nullopt, std::nullopt, Spec(DType::kFp8E4M3), std::nullopt}});
  config.layer_quant_config.push_back({"c", LayerQuantConfig{std::nullopt, std::nullopt, Spec(DType::kUInt8), std::nullopt}});
  config.exclude = {"c"};
  auto q = ModelQuantizer::Quantize(model.ptr(), config);
  ASSERT_TRUE(q.ok()) << q.status();
  std::vector<std::string> lines;
  for (const auto& r : (*q)->Report()) lines.push_back(r.ToString());
  EXPECT_EQ(lines, (std::vector<std::string>{"emb Embedding unquantized", "a Linear layer_type_quant_config[Linear]",
                                             "b1 Linear layer_quant_config[b*]", "c Linear exclude[c]",
                                             "conv Conv2d global_quant_config"}));
  EXPECT_NE(model->ptr<nn::EmbeddingImpl>(0), nullptr);  // untouched
  EXPECT_EQ(model->ptr<QuantLinear>(1)->config().weight->qscheme, QScheme::kPerChannel);
  EXPECT_EQ(model->ptr<QuantLinear>(2)->config().weight->dtype, DType::kFp8E4M3);
  EXPECT_NE(model->ptr<nn::LinearImpl>(3), nullptr);  // excluded although a pattern names it
  EXPECT_EQ((*q)->Find("conv")->quantizers->config().weight->qscheme, QScheme::kPerTensor);
  EXPECT_EQ((*q)->modules().size(), 3u);
}

struct Containers : nn::Module {
  Containers() {
    list = register_module("list", nn::ModuleList(nn::Linear(4, 4), nn::Linear(4, 4)));
    dict = register_module("dict", nn::ModuleDict(std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>>{
                                       {"x", nn::Linear(4, 4).ptr()}, {"y", nn::Linear(4, 4).ptr()}}));
  }
  nn::ModuleList list{nullptr};
  nn::ModuleDict dict{nullptr};
};

TEST(ModelQuantizerModesTest, ModuleListAndModuleDictChangeTheirOwnEntriesAndKeepModes) {
  auto model = std::make_shared<Containers>();
  model->eval();
  model->dict["x"]->train();  // a mixed mode, which the rebuilt containers must keep
  Config config;
  config.global_quant_config.weight = Spec(DType::kInt8);
  config.exclude = {"list.0"};
  auto q = ModelQuantizer::Quantize(model, config);
  ASSERT_TRUE(q.ok()) << q.status();
  // What a forward iterating the containers sees: their own storage, not just the children list.
  EXPECT_NE(model->list->ptr<nn::LinearImpl>(0), nullptr);
  EXPECT_NE(model->list->ptr<QuantLinear>(1), nullptr);
  EXPECT_NE(std::dynamic_pointer_cast<QuantLinear>(model->dict["x"]), nullptr);
  EXPECT_NE(std::dynamic_pointer_cast<QuantLinear>(model->dict["y"]), nullptr);
  EXPECT_EQ(model->dict->keys(), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(model->list->named_children().keys(), (std::vector<std::string>{"0", "1"}));
  EXPECT_FALSE(model->list->is_training());
  EXPECT_FALSE(model->list->ptr(1)->is_training());
  EXPECT_TRUE(model->dict["x"]->is_training());
  EXPECT_FALSE(model->dict["y"]->is_training());
}

TEST(ModelQuantizerModesTest, StaticScaleIsTheMinMaxOfEveryCalibrationBatch) {
  torch::manual_seed(5);
  nn::Sequential model(nn::Linear(16, 8));
  Config config;
  config.global_quant_config.weight = Spec(DType::kInt8);
  config.global_quant_config.input_tensors = Spec(DType::kInt8);
  auto q = ModelQuantizer::Quantize(model.ptr(), config);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_TRUE((*q)->NeedsCalibration());
  // The largest magnitude sits in the second batch only: a scale from one batch would miss it.
  const std::vector<at::Tensor> batches = {at::randn({4, 16}), 9 * at::randn({2, 16}), at::randn({3, 16})};
  ASSERT_TRUE((*q)->Calibrate(batches, [&](const at::Tensor& x) { model->forward(x); }).ok());
  ASSERT_TRUE((*q)->Freeze().ok());
  auto all = ParamsOf(at::cat({batches[0].reshape({-1}), batches[1].reshape({-1}), batches[2].reshape({-1})}),
                      Spec(DType::kInt8), TensorRole::kActivation);
  ASSERT_TRUE(all.ok());
  const at::Tensor scale = (*q)->Find("0")->quantizers->input_quantizer()->params()->scale;
  EXPECT_TRUE(at::equal(scale, all->scale));
  // numerics.md: symmetric int8 scale = amax / ((qmax - qmin) / 2) = amax / 127.5.
  EXPECT_FLOAT_EQ(scale.item<float>(), at::cat(batches, 0).abs().max().item<float>() / 127.5f);
  EXPECT_FALSE((*q)->Calibrate(batches, [&](const at::Tensor& x) { model->forward(x); }).ok());  // after Freeze
}

TEST(ModelQuantizerModesTest, DynamicActivationsNeedNoCalibrationAndFollowEachInput) {
  torch::manual_seed(6);
  nn::Sequential model(nn::Linear(16, 8));
  const at::Tensor w = model->ptr<nn::LinearImpl>(0)->weight.detach().clone();
  const at::Tensor b = model->ptr<nn::LinearImpl>(0)->bias.detach().clone();
  Config config;
  config.global_quant_config.weight = Spec(DType::kInt8, QScheme::kPerChannel);
  config.global_quant_config.input_tensors = Spec(DType::kInt8, QScheme::kPerChannel, /*dynamic=*/true);  // per token
  auto q = ModelQuantizer::Quantize(model.ptr(), config);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_FALSE((*q)->NeedsCalibration());
  ASSERT_TRUE((*q)->Calibrate(std::vector<at::Tensor>{}, [&](const at::Tensor& x) { model->forward(x); }).ok());
  ASSERT_TRUE((*q)->Freeze().ok());
  auto wp = ParamsOf(w, Spec(DType::kInt8, QScheme::kPerChannel), TensorRole::kWeight);
  const at::Tensor wq = *FakeQuantize(w, Spec(DType::kInt8, QScheme::kPerChannel), *wp);
  for (double gain : {1.0, 50.0}) {
    const at::Tensor x = gain * at::randn({3, 16});
    auto xq = FakeQuantizeDynamic(x, *config.global_quant_config.input_tensors, TensorRole::kActivation);
    ASSERT_TRUE(xq.ok());
    EXPECT_TRUE(at::equal(model->forward(x), at::linear(*xq, wq, b))) << gain;
  }
}

TEST(ModelQuantizerModesTest, WeightOnlyFreezesWithoutDataAndCodesDequantizeToTheFrozenWeight) {
  torch::manual_seed(7);
  nn::Sequential model(nn::Linear(32, 8), nn::ConvTranspose2d(nn::ConvTranspose2dOptions(8, 6, 2).groups(2)));
  const at::Tensor w = model->ptr<nn::LinearImpl>(0)->weight.detach().clone();
  Config config;
  QuantSpec grouped = Spec(DType::kInt4, QScheme::kPerGroup);
  grouped.group_size = 16;
  config.layer_type_quant_config["Linear"].weight = grouped;
  QuantSpec per_out = Spec(DType::kUInt8, QScheme::kPerChannel);
  per_out.symmetric = false;
  per_out.ch_axis = 1;  // [8, 6/2, 2, 2]: scales per output channel of a group
  config.layer_type_quant_config["ConvTranspose2d"].weight = per_out;
  auto q = ModelQuantizer::Quantize(model.ptr(), config);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_FALSE((*q)->NeedsCalibration());
  ASSERT_TRUE((*q)->Freeze().ok());
  for (const char* name : {"0", "1"}) {
    const ModuleQuantizers& m = *(*q)->Find(name)->quantizers;
    auto codes = (*q)->ExportWeight(name);
    ASSERT_TRUE(codes.ok()) << codes.status();
    auto back = Dequantize(*codes, m.weight_quantizer()->spec(), at::kFloat);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(at::equal(*back, m.weight())) << name;
  }
  EXPECT_EQ((*q)->ExportWeight("1")->scale.sizes(), at::IntArrayRef({3}));
  EXPECT_EQ((*q)->ExportWeight("0")->scale.scalar_type(), at::kHalf);  // per-group int4: float16 scales
  const at::Tensor x = at::randn({2, 32});
  EXPECT_TRUE(at::equal(model->ptr<QuantLinear>(0)->forward(x),
                        at::linear(x, (*q)->Find("0")->quantizers->weight(), model->ptr<QuantLinear>(0)->bias())));
  EXPECT_FALSE(at::equal((*q)->Find("0")->quantizers->weight(), w));
  EXPECT_EQ((*q)->ExportWeight("missing").status().code(), absl::StatusCode::kNotFound);
}

TEST(ModelQuantizerModesTest, StaticActivationWithoutBatchesIsAPreconditionNamingTheModule) {
  nn::Sequential model(nn::Linear(4, 4));
  Config config;
  config.global_quant_config.input_tensors = Spec(DType::kInt8);
  auto q = ModelQuantizer::Quantize(model.ptr(), config);
  ASSERT_TRUE(q.ok()) << q.status();
  auto none = (*q)->Calibrate(std::vector<at::Tensor>{}, [&](const at::Tensor& x) { model->forward(x); });
  EXPECT_EQ(none.code(), absl::StatusCode::kFailedPrecondition);
  const absl::Status frozen = (*q)->Freeze();
  EXPECT_EQ(frozen.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(frozen.message()), HasSubstr("0.input_tensors"));
}

TEST(ModelQuantizerModesTest, ForwardErrorsDuringCalibrationNameTheBatch) {
  nn::Sequential model(nn::Linear(4, 4));
  Config config;
  config.global_quant_config.input_tensors = Spec(DType::kInt8);
  auto q = ModelQuantizer::Quantize(model.ptr(), config);
  ASSERT_TRUE(q.ok());
  const std::vector<at::Tensor> batches = {at::randn({2, 4}), at::randn({2, 5})};  // the second has the wrong width
  const absl::Status s = (*q)->Calibrate(batches, [&](const at::Tensor& x) { model->forward(x); });
  EXPECT_THAT(std::string(s.message()), HasSubstr("calibration batch 1"));
}

}  // namespace
}  // namespace quark::quantize
