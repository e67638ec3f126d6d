// The runtime's forward against an independent float64 reference, the layer-streamed forward against the
// whole-model forward, and the seams the quantizer uses (NamedLinears, ReplaceLinear, hooks).
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/checkpoint/checkpoint_reader.h"
#include "core/runtime/full_model.h"
#include "core/runtime/layer_streamer.h"
#include "core/runtime/module_loader.h"
#include "core/runtime/perplexity.h"
#include "core/runtime/synthetic_model.h"
#include "tests/runtime/reference_model.h"
#include "tests/runtime/test_paths.h"

namespace quark::runtime {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::vector<int64_t> SomeIds(int64_t n, int64_t vocab) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back((i * 7919 + 13) % vocab);
  return ids;
}

fs::path MakeModel(const std::string& arch, const std::string& dtype, uint64_t max_shard_bytes = 5'000'000'000ull) {
  const fs::path dir = fs::temp_directory_path() / ("quark_rt_" + arch + "_" + dtype + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  SyntheticModelOptions options;
  options.arch = arch;
  options.shape = "tiny";
  options.dtype = dtype;
  options.seed = 5;
  options.out_dir = dir.string();
  options.max_shard_bytes = max_shard_bytes;
  const absl::Status status = MakeSyntheticModel(options);
  EXPECT_TRUE(status.ok()) << status;
  return dir;
}

// The full model, the streamer and the fp64 reference agree on the logits.
void ExpectAllForwardsAgree(const fs::path& dir, int64_t seq) {
  auto lm = CausalLm::Open(dir.string());
  ASSERT_TRUE(lm.ok()) << lm.status();
  const auto ids = SomeIds(seq, (*lm)->model().config().vocab_size);
  const at::Tensor id_tensor = at::tensor(ids, at::kLong).unsqueeze(0);
  auto logits = (*lm)->Forward(id_tensor);
  ASSERT_TRUE(logits.ok()) << logits.status();
  EXPECT_EQ(logits->sizes(), (std::vector<int64_t>{1, seq, (*lm)->model().config().vocab_size}));
  const at::Tensor reference = testing::ReferenceLogits(dir.string(), ids);
  EXPECT_LT((logits->squeeze(0).to(at::kDouble) - reference).abs().max().item<double>(), 1e-4);

  auto streamer = LayerStreamer::Open(dir.string());
  ASSERT_TRUE(streamer.ok()) << streamer.status();
  auto hidden = (*streamer)->Run({id_tensor});
  ASSERT_TRUE(hidden.ok()) << hidden.status();
  auto streamed = (*streamer)->model().Logits((*hidden)[0]);
  ASSERT_TRUE(streamed.ok());
  EXPECT_LT((*streamed - *logits).abs().max().item<float>(), 1e-5);
  // The chunked NLL equals cross-entropy of the reference logits.
  auto nll = (*streamer)->model().NextTokenNll((*hidden)[0], id_tensor);
  ASSERT_TRUE(nll.ok());
  const at::Tensor log_probs = at::log_softmax(reference, -1);
  double expected = 0;
  for (int64_t t = 0; t + 1 < seq; ++t) expected -= log_probs[t][ids[t + 1]].item<double>();
  EXPECT_NEAR(nll->sum().item<double>(), expected, 1e-3);
}

class SyntheticModelTest : public ::testing::Test {
 protected:
  void SetUp() override { testing::InitTestEngine(); }
};

TEST_F(SyntheticModelTest, LlamaWithGqaMatchesTheReference) {
  const fs::path dir = MakeModel("llama", "f32");
  auto config = checkpoint::LoadModelConfig(dir.string());
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->num_attention_heads, 8);
  EXPECT_EQ(config->num_key_value_heads, 4);
  ExpectAllForwardsAgree(dir, 37);
  fs::remove_all(dir);
}

TEST_F(SyntheticModelTest, OptMatchesTheReference) {
  const fs::path dir = MakeModel("opt", "f32");
  ExpectAllForwardsAgree(dir, 29);
  fs::remove_all(dir);
}

TEST_F(SyntheticModelTest, IsDeterministicShardedAndLoadsInBf16) {
  const fs::path a = MakeModel("llama", "bf16", 40'000);
  const fs::path b = fs::temp_directory_path() / ("quark_rt_copy_" + std::to_string(::getpid()));
  fs::remove_all(b);
  SyntheticModelOptions options;
  options.arch = "llama";
  options.dtype = "bf16";
  options.seed = 5;
  options.out_dir = b.string();
  options.max_shard_bytes = 40'000;
  ASSERT_TRUE(MakeSyntheticModel(options).ok());
  ASSERT_TRUE(fs::exists(a / "model.safetensors.index.json"));
  auto ra = checkpoint::CheckpointReader::Open(a.string());
  auto rb = checkpoint::CheckpointReader::Open(b.string());
  ASSERT_TRUE(ra.ok() && rb.ok());
  EXPECT_GT((*ra)->files().size(), 1u);
  for (const std::string& name : (*ra)->Names()) {
    EXPECT_EQ(std::string((*ra)->Get(name)->bytes()), std::string((*rb)->Get(name)->bytes())) << name;
  }
  auto streamer = LayerStreamer::Open(a.string(), {at::kBFloat16});
  ASSERT_TRUE(streamer.ok()) << streamer.status();
  auto result = EvaluatePerplexity(**streamer, SomeIds(40, 512));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(std::isfinite(result->mean_nll));
  EXPECT_NEAR(result->mean_nll, std::log(512.0), 0.5);  // random weights: close to uniform
  fs::remove_all(a);
  fs::remove_all(b);
}

TEST_F(SyntheticModelTest, RefusesUnknownShapesAndArches) {
  SyntheticModelOptions options;
  options.out_dir = "/tmp/unused";
  options.shape = "gpt-5";
  EXPECT_THAT(std::string(MakeSyntheticModel(options).message()), HasSubstr("llama-2-7b"));
  options.arch = "rwkv";
  EXPECT_FALSE(MakeSyntheticModel(options).ok());
  auto config = SyntheticConfig("llama", "llama-2-7b", "bf16");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->intermediate_size, 11008);
}

TEST(StreamingTest, StreamedEqualsWholeModelOnStories260K) {
  testing::InitTestEngine();
  auto lm = CausalLm::Open(testing::Stories260K());
  ASSERT_TRUE(lm.ok()) << lm.status();
  auto streamer = LayerStreamer::Open(testing::Stories260K());
  ASSERT_TRUE(streamer.ok());
  const at::Tensor a = at::tensor(SomeIds(50, 512), at::kLong).unsqueeze(0);
  const at::Tensor b = at::tensor(SomeIds(23, 512), at::kLong).unsqueeze(0);
  auto streamed = (*streamer)->Run({a, b});
  ASSERT_TRUE(streamed.ok());
  EXPECT_LT(((*streamed)[0] - (*lm)->Hidden(a).value()).abs().max().item<float>(), 1e-5);
  EXPECT_LT(((*streamed)[1] - (*lm)->Hidden(b).value()).abs().max().item<float>(), 1e-5);
  const auto reference = testing::ReferenceLogits(testing::Stories260K(), SomeIds(50, 512));
  EXPECT_LT(((*lm)->Forward(a).value().squeeze(0).to(at::kDouble) - reference).abs().max().item<double>(), 1e-4);
}

// Passes through to the wrapped linear and keeps its outputs (what KV-cache calibration does to k/v_proj).
class RecordingLinear : public LinearLike {
 public:
  explicit RecordingLinear(std::shared_ptr<LinearLike> inner) : inner_(std::move(inner)) {}
  at::Tensor forward(const at::Tensor& input) override {
    outputs.push_back(inner_->forward(input));
    return outputs.back();
  }
  int64_t in_features() const override { return inner_->in_features(); }
  int64_t out_features() const override { return inner_->out_features(); }
  at::Tensor weight() const override { return inner_->weight(); }
  at::Tensor bias() const override { return inner_->bias(); }
  std::vector<at::Tensor> outputs;

 private:
  std::shared_ptr<LinearLike> inner_;
};

TEST(LayerSeamTest, NamedLinearsCarryHfNames) {
  testing::InitTestEngine();
  auto streamer = LayerStreamer::Open(testing::Stories260K());
  ASSERT_TRUE(streamer.ok());
  auto layer = (*streamer)->model().LoadLayer(3);
  ASSERT_TRUE(layer.ok());
  std::vector<std::string> names;
  for (const auto& linear : (*layer)->NamedLinears()) names.push_back(linear.name);
  EXPECT_EQ(names, (std::vector<std::string>{
                       "model.layers.3.self_attn.q_proj", "model.layers.3.self_attn.k_proj", "model.layers.3.self_attn.v_proj",
                       "model.layers.3.self_attn.o_proj", "model.layers.3.mlp.gate_proj", "model.layers.3.mlp.up_proj",
                       "model.layers.3.mlp.down_proj"}));
  std::vector<std::string> modules;
  for (const auto& item : (*layer)->named_modules("", /*include_self=*/false)) modules.push_back(item.key());
  EXPECT_THAT(modules, ::testing::Contains("self_attn.k_proj"));
  EXPECT_THAT(modules, ::testing::Contains("post_attention_layernorm"));
}

TEST(LayerSeamTest, HookReplacesKProjAndOutputsAreUnchanged) {
  testing::InitTestEngine();
  auto streamer = LayerStreamer::Open(testing::Stories260K());
  ASSERT_TRUE(streamer.ok());
  const at::Tensor ids = at::tensor(SomeIds(30, 512), at::kLong);
  auto plain = (*streamer)->Run({ids});
  ASSERT_TRUE(plain.ok());
  std::vector<std::shared_ptr<RecordingLinear>> recorders;
  std::vector<int64_t> seen_layers;
  LayerHooks hooks;
  hooks.before = [&](int64_t index, DecoderLayer& layer, const std::vector<at::Tensor>& inputs) {
    seen_layers.push_back(index);
    EXPECT_EQ(inputs[0].sizes(), (std::vector<int64_t>{1, 30, 64}));
    auto recorder = std::make_shared<RecordingLinear>(layer.FindLinear("self_attn.k_proj"));
    recorders.push_back(recorder);
    return layer.ReplaceLinear("self_attn.k_proj", recorder);
  };
  auto hooked = (*streamer)->Run({ids}, hooks);
  ASSERT_TRUE(hooked.ok()) << hooked.status();
  EXPECT_EQ(seen_layers, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  ASSERT_EQ(recorders.size(), 5u);
  ASSERT_EQ(recorders[0]->outputs.size(), 1u);
  EXPECT_EQ(recorders[0]->outputs[0].sizes(), (std::vector<int64_t>{1, 30, 32}));
  EXPECT_TRUE(at::equal((*plain)[0], (*hooked)[0]));
}

TEST(LayerSeamTest, ReplaceLinearRefusesUnknownNamesAndWrongShapes) {
  testing::InitTestEngine();
  auto streamer = LayerStreamer::Open(testing::Stories260K());
  ASSERT_TRUE(streamer.ok());
  auto layer = (*streamer)->model().LoadLayer(0);
  ASSERT_TRUE(layer.ok());
  auto linear = std::make_shared<FloatLinear>(at::zeros({3, 3}), at::Tensor());
  EXPECT_THAT(std::string((*layer)->ReplaceLinear("self_attn.x_proj", linear).message()), HasSubstr("mlp.down_proj"));
  EXPECT_THAT(std::string((*layer)->ReplaceLinear("self_attn.q_proj", linear).message()), HasSubstr("needs [64, 64]"));
}

TEST(LayerSeamTest, HookErrorsStopTheRun) {
  testing::InitTestEngine();
  auto streamer = LayerStreamer::Open(testing::Stories260K());
  ASSERT_TRUE(streamer.ok());
  LayerHooks hooks;
  hooks.after = [](int64_t index, DecoderLayer&, const std::vector<at::Tensor>&, const std::vector<at::Tensor>&) {
    return index == 2 ? absl::AbortedError("stop at 2") : absl::OkStatus();
  };
  auto result = (*streamer)->Run({at::tensor(SomeIds(5, 512), at::kLong)}, hooks);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kAborted);
}

TEST(LoaderTest, MissingOrMisshapenWeightsAreNamed) {
  testing::InitTestEngine();
  const fs::path dir = MakeModel("llama", "f32");
  // A config that disagrees with the weights.
  std::string text = checkpoint::ModelConfigToJson(checkpoint::LoadModelConfig(dir.string()).value());
  const size_t at = text.find("\"intermediate_size\": 172");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 24, "\"intermediate_size\": 170");
  auto config = checkpoint::ParseModelConfig(text);
  ASSERT_TRUE(config.ok());
  auto reader = checkpoint::CheckpointReader::Open(dir.string());
  ASSERT_TRUE(reader.ok());
  std::shared_ptr<const checkpoint::CheckpointReader> shared(std::move(*reader));
  auto streamer = LayerStreamer::Create(*config, std::make_shared<CheckpointWeightSource>(shared));
  ASSERT_TRUE(streamer.ok());
  auto result = (*streamer)->Run({at::tensor(SomeIds(5, 512), at::kLong)});
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(std::string(result.status().message()), HasSubstr("model.layers.0.mlp.gate_proj.weight"));
  EXPECT_THAT(std::string(result.status().message()), HasSubstr("[172, 64]"));
  fs::remove_all(dir);
}

// LoadLinears fills each slot with its spec's linear, and refuses a layout whose count differs from the layer's slots
// (naming the layer and both counts) before it loads anything.
TEST(LoaderTest, LoadLinearsFillsTheSlotsOrRefusesAnotherCount) {
  testing::InitTestEngine();
  TensorMapWeightSource weights;
  weights.Set("model.layers.2.self_attn.q_proj.weight", at::ones({3, 2}));
  weights.Set("model.layers.2.fc1.weight", at::full({4, 3}, 2.0));
  weights.Set("model.layers.2.fc1.bias", at::full({4}, 5.0));
  const std::vector<checkpoint::LinearSpec> specs = {{"self_attn.q_proj", 3, 2, false, "input_layernorm"},
                                                     {"fc1", 4, 3, true, "final_layer_norm"}};
  torch::nn::Module parent;
  std::shared_ptr<LinearLike> q, fc1, extra;
  ASSERT_TRUE(LoadLinears(weights, "model.layers.2.", specs, {{&parent, &q}, {&parent, &fc1}}, at::kFloat).ok());
  ASSERT_NE(q, nullptr);
  ASSERT_NE(fc1, nullptr);
  EXPECT_TRUE(at::equal(q->weight(), at::ones({3, 2})));
  EXPECT_TRUE(at::equal(fc1->bias(), at::full({4}, 5.0)));

  std::shared_ptr<LinearLike> a, b, c;
  const absl::Status more = LoadLinears(weights, "model.layers.2.", specs, {{&parent, &a}, {&parent, &b}, {&parent, &c}},
                                        at::kFloat);
  EXPECT_EQ(more.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(more.message()), HasSubstr("model.layers.2.: the layout lists 2 linears, the layer builds 3"));
  EXPECT_EQ(a, nullptr);
  EXPECT_EQ(LoadLinears(weights, "model.layers.2.", specs, {{&parent, &a}}, at::kFloat).code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(a, nullptr);
}

}  // namespace
}  // namespace quark::runtime
