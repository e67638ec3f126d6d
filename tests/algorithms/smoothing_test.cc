// SmoothQuant, AutoSmoothQuant and AWQ on a streamed decoder layer: scaling keeps the float layer's function (GQA
// included), the scales are Quark's formulas on hand-recorded statistics, AWQ's clip search equals Quark's
// broadcast formulation, and the searches never pick a candidate worse than ratio 0 (plain RTN).
#include "core/algorithms/smoothing.h"

#include <gtest/gtest.h>

#include "core/numerics/fake_quant.h"
#include "core/runtime/llama_layer.h"
#include "tests/algorithms/synthetic_layer_fixture.h"

namespace quark::algorithms {
namespace {

QuantSpec Uint4Group(int group) {
  QuantSpec spec;
  spec.dtype = DType::kUInt4;
  spec.symmetric = false;
  spec.qscheme = QScheme::kPerGroup;
  spec.group_size = group;
  spec.ch_axis = 1;
  return spec;
}

QuantSpec Int8PerTensor() {
  QuantSpec spec;
  spec.dtype = DType::kInt8;
  spec.qscheme = QScheme::kPerTensor;
  return spec;
}

const std::vector<ScalingLayer> kLlamaPairs = {
    {"input_layernorm", {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"}, "self_attn.q_proj", "self_attn"},
    {"self_attn.v_proj", {"self_attn.o_proj"}, "self_attn.o_proj", ""},
    {"post_attention_layernorm", {"mlp.gate_proj", "mlp.up_proj"}, "mlp.gate_proj", "mlp"},
    {"mlp.up_proj", {"mlp.down_proj"}, "mlp.down_proj", ""}};

// GQA: 4 query heads over 2 KV heads, so v_proj -> o_proj crosses head groups.
class SmoothingTest : public ::testing::Test, protected quark::testing::SyntheticLlamaLayer {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(OpenSyntheticLlama(/*seed=*/5, /*count=*/3, [](int) { return 20; }));
  }

  ScalingInputs Inputs(runtime::DecoderLayer& layer) {
    ScalingInputs in;
    in.samples = &samples_;
    in.run = [this, &layer](const at::Tensor& x) { return Forward(layer, x); };
    in.context = [this](int64_t t) -> const runtime::LayerContext& { return Context(t); };
    in.heads = {4, 2};
    return in;
  }

  std::vector<at::Tensor> Outputs(runtime::DecoderLayer& layer) {
    std::vector<at::Tensor> out;
    for (const auto& s : samples_) out.push_back(Forward(layer, s));
    return out;
  }

  LayerQuantSpecs AllLinears(const QuantSpec& weight, std::optional<QuantSpec> input = std::nullopt) {
    LayerQuantSpecs specs;
    for (const auto& l : Layer()->NamedLinears()) specs[l.relative_name] = {weight, input};
    return specs;
  }

  static double MaxDiff(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
    double d = 0;
    for (size_t i = 0; i < a.size(); ++i) d = std::max(d, (a[i] - b[i]).abs().max().item<double>());
    return d;
  }
};

TEST_F(SmoothingTest, ScalingKeepsTheFloatLayerIncludingGroupedHeads) {
  auto layer = Layer();
  const std::vector<at::Tensor> before = Outputs(*layer);
  at::manual_seed(9);
  for (const auto& pair : kLlamaPairs) {
    const int64_t channels = layer->FindLinear(pair.layers[0])->in_features();
    const at::Tensor scales = at::rand({channels}) * 3 + 0.2;
    ASSERT_TRUE(ApplyScaling(*layer, pair, scales, {4, 2}).ok()) << pair.prev_op;
  }
  EXPECT_LT(MaxDiff(before, Outputs(*layer)), 1e-5);
}

// AWQ keeps every quantized linear's input: linears that read one tensor (q, k and v the normed input; gate and up)
// keep one copy between them, and each still gets its own statistic. A tensor changed in place between two reads is
// two inputs.
TEST_F(SmoothingTest, LinearsThatReadOneTensorRecordOneCopy) {
  auto layer = Layer();
  auto* llama = dynamic_cast<runtime::LlamaDecoderLayer*>(layer.get());
  ASSERT_NE(llama, nullptr);
  const std::string q = "self_attn.q_proj", k = "self_attn.k_proj", v = "self_attn.v_proj", o = "self_attn.o_proj";
  const std::string gate = "mlp.gate_proj", up = "mlp.up_proj", down = "mlp.down_proj";
  const std::vector<std::string> names = {q, k, v, o, gate, up, down};
  std::vector<at::Tensor> outputs;
  auto recorded = RecordLinearInputs(*layer, samples_, Inputs(*layer).run, names, true, &outputs);
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  const auto& in = recorded->inputs;
  for (size_t i = 0; i < samples_.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_TRUE(at::equal(in.at(q)[i], llama->input_layernorm->forward(samples_[i]).reshape({-1, 64})));
    EXPECT_TRUE(in.at(q)[i].is_same(in.at(k)[i]));
    EXPECT_TRUE(in.at(q)[i].is_same(in.at(v)[i]));
    EXPECT_TRUE(in.at(gate)[i].is_same(in.at(up)[i]));
    EXPECT_FALSE(in.at(q)[i].is_same(in.at(o)[i]));
    EXPECT_FALSE(in.at(gate)[i].is_same(in.at(down)[i]));
    EXPECT_FALSE(in.at(q)[i].is_same(in.at(gate)[i]));
    if (i > 0) EXPECT_FALSE(in.at(q)[i].is_same(in.at(q)[i - 1]));
  }
  for (const std::string& name : names) {
    const at::Tensor expected = std::get<0>(recorded->Concatenated(name).abs().max(0)).to(at::kFloat);
    EXPECT_TRUE(at::equal(recorded->abs_max.at(name), expected)) << name;
  }
  EXPECT_LT(MaxDiff(outputs, Outputs(*layer)), 1e-6);  // the forward itself is untouched

  // A runner that doubles q_proj's input in place before k_proj reads it: two inputs, two copies.
  const LayerRunner in_place = [&](const at::Tensor& sample) {
    at::Tensor x = llama->input_layernorm->forward(sample);
    at::Tensor out = layer->FindLinear(q)->forward(x);
    x.mul_(2);
    return out + layer->FindLinear(k)->forward(x).sum();
  };
  auto changed = RecordLinearInputs(*layer, samples_, in_place, {q, k}, true, nullptr);
  ASSERT_TRUE(changed.ok()) << changed.status();
  for (size_t i = 0; i < samples_.size(); ++i) {
    EXPECT_FALSE(changed->inputs.at(q)[i].is_same(changed->inputs.at(k)[i]));
    EXPECT_TRUE(at::equal(changed->inputs.at(q)[i] * 2, changed->inputs.at(k)[i]));
  }
}

TEST_F(SmoothingTest, SmoothQuantScalesAreQuarksFormula) {
  auto layer = Layer();
  auto* llama = dynamic_cast<runtime::LlamaDecoderLayer*>(layer.get());
  ASSERT_NE(llama, nullptr);
  // By hand: the input of q/k/v is input_layernorm(x); act = max |.| per channel over every sample's tokens.
  at::Tensor act;
  for (const auto& s : samples_) {
    const at::Tensor m = std::get<0>(llama->input_layernorm->forward(s).reshape({-1, 64}).abs().max(0));
    act = act.defined() ? at::maximum(act, m) : m;
  }
  at::Tensor w = at::cat({layer->FindLinear("self_attn.q_proj")->weight(), layer->FindLinear("self_attn.k_proj")->weight(),
                          layer->FindLinear("self_attn.v_proj")->weight()});
  const at::Tensor w_max = std::get<0>(w.abs().max(0)).clamp_min(1e-5);
  const float alpha = 0.5f;
  const at::Tensor expected = (act.pow(alpha) / w_max.pow(1 - alpha)).clamp_min(1e-3);
  const std::vector<at::Tensor> before = Outputs(*layer);
  const at::Tensor norm_before = llama->input_layernorm->weight().clone();
  std::vector<at::Tensor> outputs;
  auto results = SmoothQuantLayer(*layer, Inputs(*layer), {kLlamaPairs[0], kLlamaPairs[3]}, {alpha, 1e-3f}, &outputs);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 2u);
  // Bit for bit: eager pow(x, 0.5) is sqrt on the CPU and on CUDA, and the engine takes alpha 0.5 as sqrt everywhere.
  EXPECT_TRUE(at::equal((*results)[0].scales, expected)) << ((*results)[0].scales - expected).abs().max();
  // The outputs handed on are the float layer's, and the smoothed layer still computes them.
  EXPECT_LT(MaxDiff(before, outputs), 1e-6);
  EXPECT_LT(MaxDiff(before, Outputs(*layer)), 1e-5);
  // The norm now carries 1 / s.
  EXPECT_TRUE(at::allclose(llama->input_layernorm->weight() * expected, norm_before, 1e-5, 1e-6));
}

// 320 output channels: five blocks of 64 (Quark's batch where 256 does not divide), whose products reuse one memory;
// one shrink factor at a time and all ten in one product.
TEST_F(SmoothingTest, AwqClipSearchEqualsQuarksBroadcastForm) {
  at::manual_seed(11);
  at::Tensor w = at::randn({320, 128});
  w.index_put_({3, 5}, 9.0);  // an outlier the search should clip away
  const at::Tensor x = at::randn({300, 128});
  const QuantSpec spec = Uint4Group(32);
  // Quark's formulation: w [co, 1, ng, gs] * x [1, n, ng, gs] summed over gs; stride-sampled tokens.
  const int64_t stride = 300 / 300;  // fewer than 512 tokens: all of them
  const at::Tensor xs = x.slice(0, 0, 300, stride).reshape({1, -1, 4, 32});
  const at::Tensor wg = w.reshape({320, 1, 4, 32});
  const at::Tensor org_max = wg.abs().amax(-1, true);
  const at::Tensor org_out = (xs * wg).sum(-1);
  at::Tensor best = org_max.clone(), min_err = at::ones_like(org_max) * 1e9;
  for (int i = 0; i < 10; ++i) {
    const at::Tensor max_val = org_max * (1 - i / 20.0);
    const at::Tensor cur = at::clamp(wg, -max_val, max_val);
    auto params = ParamsOf(cur.reshape({320, 128}), spec, TensorRole::kWeight);
    ASSERT_TRUE(params.ok());
    const at::Tensor q = FakeQuantize(cur.reshape({320, 128}), spec, *params).value().reshape({320, 1, 4, 32});
    const at::Tensor err = ((xs * q).sum(-1) - org_out).pow(2).mean(1).view(min_err.sizes());
    const at::Tensor better = err < min_err;
    min_err = at::where(better, err, min_err);
    best = at::where(better, max_val, best);
  }
  const at::Tensor expected = best.squeeze(1).squeeze(-1);
  for (const int64_t batch_bytes : {int64_t{0}, int64_t{1} << 40}) {
    SCOPED_TRACE(batch_bytes);
    AwqOptions options;
    options.search_batch_bytes = batch_bytes;
    auto clip = AwqBestClip(w, x, spec, options);
    ASSERT_TRUE(clip.ok()) << clip.status();
    ASSERT_EQ(clip->sizes(), expected.sizes());
    // Summation order differs (batched products against elementwise sums): equal choices, values to rounding.
    EXPECT_TRUE(at::allclose(*clip, expected, 1e-6, 1e-6)) << (*clip - expected).abs().max();
    EXPECT_LT(clip->index({3, 0}).item<float>(), 9.0f);
  }
}

TEST_F(SmoothingTest, AwqNeverDoesWorseThanRoundToNearestOnTheInspectedModules) {
  const QuantSpec spec = Uint4Group(32);
  const LayerQuantSpecs specs = AllLinears(spec);
  // RTN error of the MLP: Q(W) for gate/up/down.
  auto mlp_error = [&](runtime::DecoderLayer& layer) {
    auto* llama = dynamic_cast<runtime::LlamaDecoderLayer*>(&layer);
    double err = 0;
    for (const auto& s : samples_) {
      const at::Tensor h = llama->post_attention_layernorm->forward(s);
      const at::Tensor ref = llama->mlp->forward(h);
      std::vector<std::pair<std::string, at::Tensor>> saved;
      for (const char* name : {"mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"}) {
        const at::Tensor w = layer.FindLinear(name)->weight();
        saved.emplace_back(name, w);
        (void)SetLinearWeight(layer, name, FakeQuantize(w, spec, ParamsOf(w, spec, TensorRole::kWeight).value()).value());
      }
      err += (llama->mlp->forward(h) - ref).pow(2).mean().item<double>();
      for (auto& [name, w] : saved) (void)SetLinearWeight(layer, name, w);
    }
    return err;
  };
  auto rtn_layer = Layer();
  const double rtn = mlp_error(*rtn_layer);
  auto awq_layer = Layer();
  std::map<std::string, at::Tensor> clips;
  auto results = AwqLayer(*awq_layer, Inputs(*awq_layer), {kLlamaPairs[0], kLlamaPairs[2], kLlamaPairs[3]}, specs,
                          AwqOptions{}, nullptr, &clips);
  ASSERT_TRUE(results.ok()) << results.status();
  for (const auto& r : *results) {
    EXPECT_GE(r.ratio, 0.0);
    EXPECT_LT(r.ratio, 1.0);
  }
  // q/k are never clipped; the others are.
  EXPECT_EQ(clips.count("self_attn.q_proj"), 0u);
  EXPECT_EQ(clips.count("self_attn.k_proj"), 0u);
  EXPECT_EQ(clips.count("mlp.down_proj"), 1u);
  EXPECT_LE(mlp_error(*awq_layer), rtn * 1.0001);
}

TEST_F(SmoothingTest, AutoSmoothQuantKeepsTheFloatLayerAndNamesABadLoss) {
  auto layer = Layer();
  const std::vector<at::Tensor> before = Outputs(*layer);
  const LayerQuantSpecs specs = AllLinears(Int8PerTensor(), Int8PerTensor());
  auto results = AutoSmoothQuantLayer(*layer, Inputs(*layer), kLlamaPairs, specs, "MAE", nullptr);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 4u);
  for (const auto& r : *results) EXPECT_TRUE(r.ratio >= 0 && r.ratio <= 0.9) << r.ratio;
  EXPECT_LT(MaxDiff(before, Outputs(*layer)), 1e-4);
  auto bad = AutoSmoothQuantLayer(*Layer(), Inputs(*layer), kLlamaPairs, specs, "L7", nullptr);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("compute_scale_loss"), std::string::npos);
}

TEST_F(SmoothingTest, PairsThatAreNotTheLayersAreNamed) {
  auto layer = Layer();
  ScalingLayer pair = kLlamaPairs[0];
  pair.prev_op = "input_norm";
  auto r = SmoothQuantLayer(*layer, Inputs(*layer), {kLlamaPairs[3], pair}, {}, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("scaling_layers[1].prev_op"), std::string::npos) << r.status();
  pair = kLlamaPairs[2];
  pair.layers = {"mlp.gate_proj", "mlp.down_proj"};  // down_proj reads the intermediate size, not the norm's
  r = SmoothQuantLayer(*layer, Inputs(*layer), {pair}, {}, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("scaling_layers[0].layers[1]"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace quark::algorithms
