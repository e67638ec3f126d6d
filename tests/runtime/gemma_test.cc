// Gemma 2 / Gemma 3 text (#18): config parsing as HF's Gemma2Config / Gemma3TextConfig read config.json, and the
// runtime's logits (whole model, layer streamer, perplexity) against the float64 reference of gemma_reference.cc on
// tiny models whose window is shorter than the sequence, with random (1 + w) norms.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "core/checkpoint/model_layout.h"
#include "core/runtime/full_model.h"
#include "core/runtime/layer_streamer.h"
#include "core/runtime/perplexity.h"
#include "core/runtime/synthetic_model.h"
#include "tests/runtime/gemma_models.h"
#include "tests/runtime/gemma_reference.h"
#include "tests/runtime/test_paths.h"

namespace quark::runtime {
namespace {

namespace fs = std::filesystem;
using checkpoint::ArchFamily;
using checkpoint::ModelConfig;

constexpr int64_t kWindow = 5;
constexpr int64_t kSeq = 19;  // several windows long

std::vector<int64_t> SomeIds(int64_t n, int64_t vocab) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back((i * 7919 + 13) % vocab);
  return ids;
}

// google/gemma-2-9b's config.json (the fields the runtime reads).
constexpr char kGemma2Config[] = R"({
  "architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "attn_logit_softcapping": 50.0,
  "final_logit_softcapping": 30.0, "head_dim": 256, "hidden_act": "gelu_pytorch_tanh",
  "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 3584, "intermediate_size": 14336,
  "max_position_embeddings": 8192, "num_attention_heads": 16, "num_hidden_layers": 42, "num_key_value_heads": 8,
  "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "sliding_window": 4096,
  "vocab_size": 256000, "bos_token_id": 2, "eos_token_id": 1, "torch_dtype": "float32"})";

// google/gemma-3-4b-it's text_config as a gemma3_text config (older transformers: sliding_window_pattern).
constexpr char kGemma3Config[] = R"({
  "model_type": "gemma3_text", "head_dim": 256, "hidden_size": 2560, "intermediate_size": 10240,
  "num_attention_heads": 8, "num_hidden_layers": 34, "num_key_value_heads": 4, "query_pre_attn_scalar": 256,
  "rope_local_base_freq": 10000.0, "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "rope_theta": 1000000.0,
  "sliding_window": 1024, "sliding_window_pattern": 6, "final_logit_softcapping": null,
  "attn_logit_softcapping": null, "vocab_size": 262208, "max_position_embeddings": 131072})";

TEST(GemmaConfigTest, ParsesGemma2AsHfDoes) {
  auto c = checkpoint::ParseModelConfig(kGemma2Config);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->family, ArchFamily::kGemma);
  EXPECT_EQ(c->head_dim, 256);  // not hidden / heads = 224
  EXPECT_EQ(c->query_pre_attn_scalar, 256);
  EXPECT_EQ(c->attn_logit_softcapping, 50);
  EXPECT_EQ(c->final_logit_softcapping, 30);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->rope_local_base_freq, 0);
  // Gemma2: layer 0 slides, layer 1 is global, alternating.
  EXPECT_EQ(checkpoint::LayerAttentionWindow(*c, 0), 4096);
  EXPECT_EQ(checkpoint::LayerAttentionWindow(*c, 1), 0);
  EXPECT_EQ(checkpoint::LayerAttentionWindow(*c, 40), 4096);
  EXPECT_EQ(checkpoint::LayerAttentionWindow(*c, 41), 0);
  // The MLP reads pre_feedforward_layernorm, and every layer has four norms.
  const auto linears = checkpoint::LayerLinears(*c);
  ASSERT_EQ(linears.size(), 7u);
  EXPECT_EQ(linears[4].input, "pre_feedforward_layernorm");
  EXPECT_EQ(checkpoint::LayerNormTensors(*c, 0).size(), 4u);
  // No lm_head: tied.
  for (const auto& t : checkpoint::ModelTensors(*c)) EXPECT_NE(t.name, "lm_head.weight");
}

TEST(GemmaConfigTest, ParsesGemma3PatternAndLocalRope) {
  auto c = checkpoint::ParseModelConfig(kGemma3Config);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->attn_logit_softcapping, 0);
  EXPECT_EQ(c->final_logit_softcapping, 0);
  EXPECT_EQ(c->rope_local_base_freq, 10000);
  ASSERT_TRUE(c->rope_scaling.has_value());
  EXPECT_EQ(c->rope_scaling->factor, 8);
  for (int64_t i = 0; i < 34; ++i) {
    EXPECT_EQ(checkpoint::LayerAttentionWindow(*c, i), (i + 1) % 6 == 0 ? 0 : 1024) << "layer " << i;
  }
  EXPECT_EQ(checkpoint::LayerNormTensors(*c, 0).size(), 6u);  // + q_norm, k_norm [head_dim]
  EXPECT_EQ(checkpoint::LayerNormTensors(*c, 0)[5].shape, (std::vector<int64_t>{256}));
  // Round trip through what make-model writes (layer_types instead of the pattern).
  auto again = checkpoint::ParseModelConfig(checkpoint::ModelConfigToJson(*c));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->sliding_window_layers, c->sliding_window_layers);
  EXPECT_EQ(again->rope_local_base_freq, 10000);
  EXPECT_EQ(again->rope_scaling->factor, 8);
  EXPECT_EQ(again->query_pre_attn_scalar, 256);
}

// transformers >= 5 writes RoPE per layer type under rope_parameters.
TEST(GemmaConfigTest, ReadsRopeParametersPerLayerType) {
  std::string text = kGemma3Config;
  const std::string v5 = R"(, "rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 4.0,
      "rope_theta": 500000.0}, "sliding_attention": {"rope_type": "default", "rope_theta": 20000.0}}})";
  std::string v5_text = text;
  for (const char* key : {"\"rope_local_base_freq\": 10000.0, ", "\"rope_scaling\": {\"factor\": 8.0, \"rope_type\": \"linear\"}, ",
                          "\"rope_theta\": 1000000.0,"}) {
    const size_t at = v5_text.find(key);
    ASSERT_NE(at, std::string::npos) << key;
    v5_text.erase(at, std::string(key).size());
  }
  v5_text.replace(v5_text.rfind('}'), 1, v5);
  auto c = checkpoint::ParseModelConfig(v5_text);
  ASSERT_TRUE(c.ok()) << c.status() << "\n" << v5_text;
  EXPECT_EQ(c->rope_theta, 500000.0);
  EXPECT_EQ(c->rope_local_base_freq, 20000.0);
  ASSERT_TRUE(c->rope_scaling.has_value());
  EXPECT_EQ(c->rope_scaling->factor, 4.0);
  std::string scaled_local = v5_text;
  scaled_local.replace(scaled_local.find("\"rope_type\": \"default\""), 21, "\"rope_type\": \"linear\"");
  EXPECT_FALSE(checkpoint::ParseModelConfig(scaled_local).ok());
}

TEST(GemmaConfigTest, RefusesWhatItCannotCompute) {
  const auto error = [](const std::string& text) { return std::string(checkpoint::ParseModelConfig(text).status().message()); };
  EXPECT_NE(error(R"({"model_type": "gemma3", "text_config": {}})").find("language_model"), std::string::npos);
  std::string act = kGemma2Config;
  const std::string gelu = "\"hidden_activation\": \"gelu_pytorch_tanh\"";
  act.replace(act.find(gelu), gelu.size(), "\"hidden_activation\": \"relu\"");
  EXPECT_NE(error(act).find("hidden_activation"), std::string::npos);
  std::string untied = kGemma2Config;
  untied.replace(untied.rfind('}'), 1, ", \"tie_word_embeddings\": false}");
  EXPECT_NE(error(untied).find("tie_word_embeddings"), std::string::npos);
  std::string types = kGemma3Config;
  types.replace(types.rfind('}'), 1, ", \"layer_types\": [\"full_attention\"]}");
  EXPECT_NE(error(types).find("layer_types"), std::string::npos);
}

class GemmaRuntimeTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    testing::InitTestEngine();
    dir_ = fs::temp_directory_path() / ("quark_rt_" + GetParam() + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    // Gemma 3 with linear rope scaling, so the global layer's tables differ from the local ones in two ways.
    config_ = testing::TinyGemmaConfig(GetParam(), kWindow, /*rope_scaling=*/GetParam() == "gemma3_text");
    ASSERT_TRUE(testing::WriteRandomGemmaModel(config_, dir_.string(), 7, /*weight_std=*/0.15).ok());
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  ModelConfig config_;
};

TEST_P(GemmaRuntimeTest, WholeAndStreamedModelMatchTheReference) {
  const std::vector<int64_t> ids = SomeIds(kSeq, 512);
  const at::Tensor id_tensor = at::tensor(ids, at::kLong).unsqueeze(0);
  const at::Tensor reference = testing::GemmaReferenceLogits(dir_.string(), ids);
  // Not near-uniform: the check below would pass for almost any model otherwise.
  EXPECT_GT((reference.amax(-1) - reference.amin(-1)).min().item<double>(), 1.0);
  auto lm = CausalLm::Open(dir_.string());
  ASSERT_TRUE(lm.ok()) << lm.status();
  auto whole = (*lm)->Forward(id_tensor);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_LT((whole->squeeze(0).to(at::kDouble) - reference).abs().max().item<double>(), 1e-4);

  auto streamer = LayerStreamer::Open(dir_.string());
  ASSERT_TRUE(streamer.ok()) << streamer.status();
  auto hidden = (*streamer)->Run({id_tensor});
  ASSERT_TRUE(hidden.ok()) << hidden.status();
  auto streamed = (*streamer)->model().Logits((*hidden)[0]);
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  EXPECT_LT((streamed->squeeze(0).to(at::kDouble) - reference).abs().max().item<double>(), 1e-4);

  PerplexityOptions options;
  options.seq_len = kSeq;
  auto result = EvaluatePerplexity(**streamer, ids, options);
  ASSERT_TRUE(result.ok()) << result.status();
  const at::Tensor log_probs = at::log_softmax(reference, -1);
  double nll = 0;
  for (int64_t t = 0; t + 1 < kSeq; ++t) nll -= log_probs[t][ids[t + 1]].item<double>();
  EXPECT_NEAR(result->mean_nll, nll / (kSeq - 1), 1e-4);
}

// Each Gemma rule matters on these models: breaking it in the reference's input moves the logits far beyond the
// tolerance above (a test that could not tell a window from none would pass for a wrong mask).
TEST_P(GemmaRuntimeTest, WindowAndSoftCapsChangeTheLogits) {
  const std::vector<int64_t> ids = SomeIds(kSeq, 512);
  const at::Tensor id_tensor = at::tensor(ids, at::kLong).unsqueeze(0);
  const at::Tensor windowed = CausalLm::Open(dir_.string()).value()->Forward(id_tensor).value().squeeze(0);
  ModelConfig changed = config_;
  changed.sliding_window = 0;
  changed.sliding_window_layers.clear();
  changed.attn_logit_softcapping = changed.attn_logit_softcapping > 0 ? 5.0 : 0.0;
  std::ofstream(dir_ / "config.json", std::ios::trunc) << checkpoint::ModelConfigToJson(changed);
  const at::Tensor full = CausalLm::Open(dir_.string()).value()->Forward(id_tensor).value().squeeze(0);
  const at::Tensor reference = testing::GemmaReferenceLogits(dir_.string(), ids);
  EXPECT_LT((full.to(at::kDouble) - reference).abs().max().item<double>(), 1e-4);
  EXPECT_GT((windowed - full).abs().narrow(0, kWindow, kSeq - kWindow).max().item<float>(), 1e-2);
}

INSTANTIATE_TEST_SUITE_P(Archs, GemmaRuntimeTest, ::testing::Values("gemma2", "gemma3_text"));

TEST(GemmaSyntheticTest, MakeModelWritesZeroNormsAndTheRealShapes) {
  testing::InitTestEngine();
  const fs::path dir = fs::temp_directory_path() / ("quark_rt_gemma_make_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  SyntheticModelOptions options;
  options.arch = "gemma3_text";
  options.dtype = "f32";
  options.out_dir = dir.string();
  ASSERT_TRUE(MakeSyntheticModel(options).ok());
  auto streamer = LayerStreamer::Open(dir.string());
  ASSERT_TRUE(streamer.ok()) << streamer.status();
  EXPECT_EQ((*streamer)->config().family, ArchFamily::kGemma);
  auto norm = (*streamer)->model().weights().Get("model.layers.0.pre_feedforward_layernorm.weight", at::kFloat);
  ASSERT_TRUE(norm.ok());
  EXPECT_EQ(norm->abs().max().item<float>(), 0.0f);  // (1 + w) norms: identity scale is w = 0
  fs::remove_all(dir);
  auto nine_b = SyntheticConfig("gemma2", "gemma-2-9b", "bf16");
  ASSERT_TRUE(nine_b.ok()) << nine_b.status();
  EXPECT_EQ(nine_b->head_dim, 256);
  EXPECT_EQ(nine_b->num_hidden_layers, 42);
  auto one_b = SyntheticConfig("gemma3_text", "gemma-3-1b", "bf16");
  ASSERT_TRUE(one_b.ok()) << one_b.status();
  EXPECT_EQ(one_b->vocab_size, 262144);
  EXPECT_EQ(checkpoint::LayerAttentionWindow(*one_b, 5), 0);
  EXPECT_EQ(checkpoint::LayerAttentionWindow(*one_b, 4), 512);
}

}  // namespace
}  // namespace quark::runtime
