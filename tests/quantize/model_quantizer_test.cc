// ModelQuantizer on small LibTorch-built models: the root's forward after in-place replacement equals a reference
// computed by hand (FakeQuantize from core/numerics, then at::conv2d / conv_transpose2d / embedding / embedding_bag /
// linear), for a Sequential CNN, a custom module with embeddings (ReplaceableParent) and a Sequential nested in a
// custom module; and the in-place replacement errors (unsupported parent, root, non-dividing group size).
#include "core/quantize/model_quantizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include "core/numerics/fake_quant.h"
#include "core/quantize/child_replacement.h"
#include "core/quantize/quant_conv.h"
#include "core/quantize/quant_embedding.h"
#include "core/quantize/quant_linear.h"

namespace quark::quantize {
namespace {

namespace nn = torch::nn;
using ::testing::HasSubstr;

QuantSpec Int8(QScheme scheme = QScheme::kPerTensor, std::optional<int> ch_axis = std::nullopt) {
  QuantSpec s;
  s.dtype = DType::kInt8;
  s.qscheme = scheme;
  s.ch_axis = ch_axis;
  return s;
}

// The weight fake-quantized with its own MinMax parameters (what Freeze does for a weight).
at::Tensor FakeWeight(const at::Tensor& w, const QuantSpec& spec) {
  auto params = ParamsOf(w, spec, TensorRole::kWeight);
  EXPECT_TRUE(params.ok()) << params.status();
  auto fq = FakeQuantize(w, spec, *params, TensorRole::kWeight);
  EXPECT_TRUE(fq.ok()) << fq.status();
  return *fq;
}

// A static activation's calibrated parameters: MinMax over every calibration tensor.
QuantParams StaticParams(const std::vector<at::Tensor>& seen, const QuantSpec& spec) {
  std::vector<at::Tensor> flat;
  for (const auto& t : seen) flat.push_back(t.reshape({-1}));
  auto params = ParamsOf(at::cat(flat), spec, TensorRole::kActivation);
  EXPECT_TRUE(params.ok()) << params.status();
  return *params;
}

at::Tensor FakeActivation(const at::Tensor& x, const QuantSpec& spec, const QuantParams& params) {
  auto fq = FakeQuantize(x, spec, params, TensorRole::kActivation);
  EXPECT_TRUE(fq.ok()) << fq.status();
  return *fq;
}

// Every quantizer of the CNN test: int8 per-channel weights, int8 per-tensor static inputs.
Config CnnConfig() {
  Config c;
  c.global_quant_config.weight = Int8(QScheme::kPerChannel, 0);
  c.global_quant_config.input_tensors = Int8();
  // ConvTranspose2d's weight is [in, out/groups, kh, kw]: ch_axis 1 gives one scale per output channel.
  c.layer_type_quant_config["ConvTranspose2d"] = c.global_quant_config;
  c.layer_type_quant_config["ConvTranspose2d"].weight = Int8(QScheme::kPerChannel, 1);
  return c;
}

TEST(ModelQuantizerTest, SequentialCnnRunsQuantizedModulesThroughTheCallersHandle) {
  torch::manual_seed(1);
  nn::Sequential model(nn::Conv2d(nn::Conv2dOptions(3, 8, 3).padding(1)), nn::ReLU(),
                       nn::ConvTranspose2d(nn::ConvTranspose2dOptions(8, 4, 3).stride(2).padding(1).output_padding(1)),
                       nn::Flatten(), nn::Linear(4 * 10 * 10, 10));
  auto* impl_before = model.get();
  auto& conv = *model->ptr<nn::Conv2dImpl>(0);
  auto& deconv = *model->ptr<nn::ConvTranspose2dImpl>(2);
  auto& fc = *model->ptr<nn::LinearImpl>(4);
  const at::Tensor cw = conv.weight.detach().clone(), cb = conv.bias.detach().clone();
  const at::Tensor dw = deconv.weight.detach().clone(), db = deconv.bias.detach().clone();
  const at::Tensor fw = fc.weight.detach().clone(), fb = fc.bias.detach().clone();

  auto q = ModelQuantizer::Quantize(model.ptr(), CnnConfig());
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(model.get(), impl_before);  // the same Sequential object, its contents swapped
  EXPECT_NE(model->ptr<QuantConv2d>(0), nullptr);
  EXPECT_NE(model->ptr<QuantConvTranspose2d>(2), nullptr);
  EXPECT_NE(model->ptr<QuantLinear>(4), nullptr);
  EXPECT_EQ(model->named_children().keys(), (std::vector<std::string>{"0", "1", "2", "3", "4"}));

  std::vector<at::Tensor> batches = {at::randn({2, 3, 5, 5}), 3 * at::randn({1, 3, 5, 5}), at::rand({2, 3, 5, 5})};
  ASSERT_TRUE((*q)->Calibrate(batches, [&](const at::Tensor& x) { model->forward(x); }).ok());
  ASSERT_TRUE((*q)->Freeze().ok());

  // Calibration saw the float model: each static input scale is the MinMax over every batch of that input.
  std::vector<at::Tensor> conv_in = batches, deconv_in, fc_in;
  for (const auto& x : batches) {
    deconv_in.push_back(at::relu(at::conv2d(x, cw, cb, 1, 1)));
    fc_in.push_back(at::conv_transpose2d(deconv_in.back(), dw, db, 2, 1, 1).flatten(1));
  }
  const QuantSpec in = Int8();
  const QuantParams p_conv = StaticParams(conv_in, in), p_deconv = StaticParams(deconv_in, in),
                    p_fc = StaticParams(fc_in, in);
  EXPECT_TRUE(at::equal((*q)->Find("0")->quantizers->input_quantizer()->params()->scale, p_conv.scale));
  EXPECT_TRUE(at::equal((*q)->Find("2")->quantizers->input_quantizer()->params()->scale, p_deconv.scale));
  EXPECT_EQ((*q)->Find("2")->quantizers->weight_quantizer()->params()->scale.sizes(), at::IntArrayRef({4}));
  EXPECT_EQ((*q)->Find("0")->quantizers->weight_quantizer()->params()->scale.sizes(), at::IntArrayRef({8}));

  const at::Tensor x = at::randn({2, 3, 5, 5});
  at::Tensor ref = at::conv2d(FakeActivation(x, in, p_conv), FakeWeight(cw, Int8(QScheme::kPerChannel, 0)), cb, 1, 1);
  ref = at::relu(ref);
  ref = at::conv_transpose2d(FakeActivation(ref, in, p_deconv), FakeWeight(dw, Int8(QScheme::kPerChannel, 1)), db, 2,
                             1, 1);
  ref = at::linear(FakeActivation(ref.flatten(1), in, p_fc), FakeWeight(fw, Int8(QScheme::kPerChannel, 0)), fb);
  EXPECT_TRUE(at::equal(model->forward(x), ref));
  const at::Tensor float_out =
      at::linear(at::conv_transpose2d(at::relu(at::conv2d(x, cw, cb, 1, 1)), dw, db, 2, 1, 1).flatten(1), fw, fb);
  EXPECT_FALSE(at::equal(ref, float_out));  // the reference really is quantized
}

// A user module that calls its children through AnyModule fields and says how to swap them.
class EmbeddingNet : public nn::Module, public ReplaceableParent {
 public:
  EmbeddingNet() {
    emb_ = nn::AnyModule(register_module("emb", nn::Embedding(20, 8)));
    bag_ = nn::AnyModule(register_module("bag", nn::EmbeddingBag(nn::EmbeddingBagOptions(20, 8).mode(torch::kSum))));
    max_bag_ = nn::AnyModule(register_module("max_bag", nn::EmbeddingBag(nn::EmbeddingBagOptions(20, 8).mode(torch::kMax))));
    fc_ = nn::AnyModule(register_module("fc", nn::Linear(8, 5)));
  }
  // ids [B, T]; bag_ids 1-D with offsets [B]; weights of bag_ids.
  at::Tensor forward(const at::Tensor& ids, const at::Tensor& bag_ids, const at::Tensor& offsets,
                     const at::Tensor& weights) {
    const at::Tensor e = emb_.forward(ids).mean(1);
    const at::Tensor b = bag_.forward(bag_ids, offsets, weights);
    const at::Tensor m = max_bag_.forward(bag_ids, offsets);
    return fc_.forward(e + b + m);
  }
  absl::Status ReplaceChild(const std::string& name, const nn::AnyModule& replacement) override {
    nn::AnyModule* field = name == "emb" ? &emb_ : name == "bag" ? &bag_ : name == "max_bag" ? &max_bag_
                           : name == "fc"  ? &fc_ : nullptr;
    if (field == nullptr) return absl::NotFoundError(name);
    *field = replacement;
    return absl::OkStatus();
  }

 private:
  nn::AnyModule emb_, bag_, max_bag_, fc_;
};

TEST(ModelQuantizerTest, CustomModuleWithEmbeddingsImplementsReplaceChild) {
  torch::manual_seed(2);
  auto net = std::make_shared<EmbeddingNet>();
  auto params = net->named_parameters();
  const at::Tensor ew = params["emb.weight"].detach().clone(), bw = params["bag.weight"].detach().clone();
  const at::Tensor mw = params["max_bag.weight"].detach().clone();
  const at::Tensor fw = params["fc.weight"].detach().clone(), fb = params["fc.bias"].detach().clone();

  Config c;
  c.global_quant_config.weight = Int8(QScheme::kPerChannel, 0);
  c.global_quant_config.input_tensors = Int8();
  // Embedding: per-row int8 and an input spec, which an embedding ignores (its input is indices), as Quark does.
  c.layer_type_quant_config["Embedding"] = c.global_quant_config;
  QuantSpec grouped;  // uint4 groups of 4 along embedding_dim: 16-bit scales (scale_dtype.h)
  grouped.dtype = DType::kUInt4;
  grouped.symmetric = false;
  grouped.qscheme = QScheme::kPerGroup;
  grouped.group_size = 4;
  c.layer_quant_config.push_back({"*bag", LayerQuantConfig{std::nullopt, std::nullopt, grouped, std::nullopt}});
  auto q = ModelQuantizer::Quantize(net, c);
  ASSERT_TRUE(q.ok()) << q.status();
  std::vector<std::string> lines;
  for (const auto& r : (*q)->Report()) lines.push_back(r.ToString());
  EXPECT_EQ(lines, (std::vector<std::string>{"emb Embedding layer_type_quant_config[Embedding] (ignored: input_tensors)",
                                             "bag EmbeddingBag layer_quant_config[*bag]",
                                             "max_bag EmbeddingBag layer_quant_config[*bag]",
                                             "fc Linear global_quant_config"}));

  const at::Tensor ids = at::randint(0, 20, {3, 4}, at::kLong), bag_ids = at::randint(0, 20, {7}, at::kLong);
  const at::Tensor offsets = at::tensor({0, 2, 5}, at::kLong), weights = at::rand({7});
  ASSERT_TRUE((*q)->Calibrate(std::vector<int>{0}, [&](int) { net->forward(ids, bag_ids, offsets, weights); }).ok());
  ASSERT_TRUE((*q)->Freeze().ok());

  auto group_fake = [&](const at::Tensor& w) {
    auto p = ParamsOf(w, grouped, TensorRole::kWeight);
    EXPECT_TRUE(p.ok());
    p->scale = p->scale.to(at::kHalf).to(at::kFloat);  // the export's float16 scale, used by fake-quant too
    return *FakeQuantize(w, grouped, *p, TensorRole::kWeight);
  };
  const at::Tensor eq = FakeWeight(ew, Int8(QScheme::kPerChannel, 0)), bq = group_fake(bw), mq = group_fake(mw);
  auto float_sum = [&](const at::Tensor& e, const at::Tensor& b, const at::Tensor& m) {
    const at::Tensor s = at::embedding(e, ids).mean(1) +
                         std::get<0>(at::embedding_bag(b, bag_ids, offsets, false, 0, false, weights)) +
                         std::get<0>(at::embedding_bag(m, bag_ids, offsets, false, 2, false, {}));
    return s;
  };
  const QuantParams p_fc = StaticParams({float_sum(ew, bw, mw)}, Int8());
  const at::Tensor ref = at::linear(FakeActivation(float_sum(eq, bq, mq), Int8(), p_fc),
                                    FakeWeight(fw, Int8(QScheme::kPerChannel, 0)), fb);
  EXPECT_TRUE(at::equal(net->forward(ids, bag_ids, offsets, weights), ref));
  EXPECT_EQ((*q)->Find("bag")->quantizers->weight_quantizer()->params()->scale.scalar_type(), at::kHalf);
}

TEST(ModelQuantizerTest, EmbeddingBagInSequentialTakesItsDefaultArguments) {
  torch::manual_seed(3);
  nn::Sequential model(nn::EmbeddingBag(nn::EmbeddingBagOptions(10, 6).mode(torch::kMean)));
  const at::Tensor w = model->ptr<nn::EmbeddingBagImpl>(0)->weight.detach().clone();
  Config c;
  c.layer_type_quant_config["EmbeddingBag"].weight = Int8(QScheme::kPerChannel, 0);
  auto q = ModelQuantizer::Quantize(model.ptr(), c);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_FALSE((*q)->NeedsCalibration());  // weight-only
  ASSERT_TRUE((*q)->Freeze().ok());
  const at::Tensor ids = at::randint(0, 10, {4, 3}, at::kLong);  // 2-D: fixed-length bags, no offsets
  const at::Tensor ref = FakeWeight(w, Int8(QScheme::kPerChannel, 0)).index_select(0, ids.reshape({-1}))
                             .reshape({4, 3, 6}).mean(1);
  EXPECT_TRUE(at::allclose(model->forward(ids), ref, 1e-6, 1e-6));
}

struct Outer : nn::Module {
  Outer() {
    body = register_module("body", nn::Sequential(nn::Linear(6, 12), nn::ReLU(), nn::Linear(12, 4)));
    head = register_module("head", nn::Linear(4, 2));
  }
  at::Tensor forward(const at::Tensor& x) { return head->forward(body->forward(x)); }
  nn::Sequential body{nullptr};
  nn::Linear head{nullptr};
};

TEST(ModelQuantizerTest, SequentialNestedInACustomModule) {
  torch::manual_seed(4);
  auto outer = std::make_shared<Outer>();
  const at::Tensor w0 = outer->body->ptr<nn::LinearImpl>(0)->weight.detach().clone();
  const at::Tensor b0 = outer->body->ptr<nn::LinearImpl>(0)->bias.detach().clone();
  const at::Tensor w2 = outer->body->ptr<nn::LinearImpl>(2)->weight.detach().clone();
  const at::Tensor b2 = outer->body->ptr<nn::LinearImpl>(2)->bias.detach().clone();
  const at::Tensor hw = outer->head->weight.detach().clone(), hb = outer->head->bias.detach().clone();
  Config c;
  c.global_quant_config.weight = Int8();
  c.exclude = {"head"};  // Outer calls head through its typed field: it cannot take a replacement
  auto q = ModelQuantizer::Quantize(outer, c);
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_EQ((*q)->modules().size(), 2u);
  EXPECT_EQ((*q)->modules()[0].name, "body.0");
  ASSERT_TRUE((*q)->Freeze().ok());
  const at::Tensor x = at::randn({5, 6});
  const at::Tensor ref =
      at::linear(at::linear(at::relu(at::linear(x, FakeWeight(w0, Int8()), b0)), FakeWeight(w2, Int8()), b2), hw, hb);
  EXPECT_TRUE(at::equal(outer->forward(x), ref));
}

TEST(ModelQuantizerTest, ParentWithoutReplaceInterfaceIsRefusedAndNothingChanges) {
  auto outer = std::make_shared<Outer>();
  Config c;
  c.global_quant_config.weight = Int8();
  auto q = ModelQuantizer::Quantize(outer, c);
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(q.status().message()), HasSubstr("head: cannot be replaced in place"));
  EXPECT_THAT(std::string(q.status().message()), HasSubstr("Outer"));
  EXPECT_NE(outer->body->ptr<nn::LinearImpl>(0), nullptr);  // all or nothing: body was not touched either
}

// A user parent whose ReplaceChild refuses its second child: the first, already swapped, must be put back.
class PickyPair : public nn::Module, public ReplaceableParent {
 public:
  PickyPair() {
    first_ = nn::AnyModule(register_module("first", nn::Linear(4, 4)));
    second_ = nn::AnyModule(register_module("second", nn::Linear(4, 4)));
  }
  at::Tensor forward(const at::Tensor& x) { return second_.forward(first_.forward(x)); }
  absl::Status ReplaceChild(const std::string& name, const nn::AnyModule& replacement) override {
    if (name == "second" && replacement.ptr() != second_original_) return absl::UnavailableError("second is pinned");
    (name == "first" ? first_ : second_) = replacement;
    return absl::OkStatus();
  }
  std::shared_ptr<nn::Module> first_module() const { return first_.ptr(); }
  std::shared_ptr<nn::Module> second_original_ = nullptr;

 private:
  nn::AnyModule first_, second_;
};

TEST(ModelQuantizerTest, AFailedCustomReplacementPutsTheSwappedModulesBack) {
  auto pair = std::make_shared<PickyPair>();
  const std::shared_ptr<nn::Module> original_first = pair->first_module();
  const at::Tensor x = at::randn({2, 4});
  const at::Tensor before = pair->forward(x);
  Config c;
  c.global_quant_config.weight = Int8();
  auto q = ModelQuantizer::Quantize(pair, c);
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(q.status().message()), HasSubstr("second is pinned"));
  EXPECT_EQ(pair->first_module(), original_first);  // the float module is back in the forward
  EXPECT_TRUE(at::equal(pair->forward(x), before));
  EXPECT_EQ(pair->named_children()["first"], original_first);
}

TEST(ModelQuantizerTest, RootModuleItselfIsRefused) {
  auto q = ModelQuantizer::Quantize(nn::Linear(4, 4).ptr(), [] {
    Config c;
    c.global_quant_config.weight = Int8();
    return c;
  }());
  ASSERT_FALSE(q.ok());
  EXPECT_THAT(std::string(q.status().message()), HasSubstr("root module is a Linear"));
}

TEST(ModelQuantizerTest, GroupSizeThatDoesNotDivideNamesModuleFieldAndSource) {
  nn::Sequential model(nn::Conv2d(nn::Conv2dOptions(3, 8, 3)), nn::Linear(8, 4));
  Config c;
  c.global_quant_config.weight = Int8();
  QuantSpec grouped = Int8(QScheme::kPerGroup);
  grouped.group_size = 2;  // the grouped (last) axis of [8, 3, 3, 3] is 3
  c.layer_type_quant_config["Conv2d"].weight = grouped;
  auto q = ModelQuantizer::Quantize(model.ptr(), c);
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(q.status().message());
  EXPECT_THAT(message, HasSubstr("0.weight: group_size: 2 does not divide 3"));
  EXPECT_THAT(message, HasSubstr("layer_type_quant_config[Conv2d]"));
  EXPECT_NE(model->ptr<nn::Conv2dImpl>(0), nullptr);
  EXPECT_NE(model->ptr<nn::LinearImpl>(1), nullptr);
}

}  // namespace
}  // namespace quark::quantize
