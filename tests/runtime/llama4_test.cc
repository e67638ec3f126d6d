// Llama 4 text (#32): config parsing and its refusals naming the field, the checkpoint layout (dense and MoE layers
// interleaved), and the runtime's logits against Hugging Face's own Llama4ForCausalLM (modeling_llama4.py run in the
// trixie chroot by tests/peers/llama4/make_reference.sh; its output for the tiny seed-7 model committed in data/).
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <functional>
#include <iterator>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "core/checkpoint/llama4_config.h"
#include "core/checkpoint/llama4_layout.h"
#include "core/runtime/full_model.h"
#include "core/runtime/llama4_attention.h"
#include "core/runtime/llama4_layer.h"
#include "core/runtime/llama4_synthetic.h"
#include "core/runtime/synthetic_model.h"
#include "tests/runtime/test_paths.h"

namespace quark::runtime {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// The text_config of meta-llama/Llama-4-Scout-17B-16E-Instruct's config.json (the fields the runtime reads).
constexpr char kScoutTextConfig[] = R"({"attention_bias": false, "attention_chunk_size": 8192,
  "attention_dropout": 0.0, "attn_scale": 0.1, "attn_temperature_tuning": 4, "bos_token_id": 200000,
  "eos_token_id": [200001, 200007, 200008], "floor_scale": 8192, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 5120, "interleave_moe_layer_step": 1, "intermediate_size": 8192, "intermediate_size_mlp": 16384,
  "max_position_embeddings": 10485760, "model_type": "llama4_text", "no_rope_layers": [], "num_attention_heads": 40,
  "num_experts_per_tok": 1, "num_hidden_layers": 48, "num_key_value_heads": 8, "num_local_experts": 16,
  "pad_token_id": 200018, "rms_norm_eps": 1e-05, "rope_scaling": {"factor": 16.0, "high_freq_factor": 1.0,
  "low_freq_factor": 1.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"}, "rope_theta": 500000.0,
  "router_aux_loss_coef": 0.001, "router_jitter_noise": 0.0, "torch_dtype": "bfloat16", "use_qk_norm": true,
  "vocab_size": 202048})";

std::string Refusal(const std::string& field, const std::string& value) {
  nlohmann::json root = nlohmann::json::parse(kScoutTextConfig);
  if (value == "<erase>") {
    root.erase(field);
  } else {
    root[field] = nlohmann::json::parse(value);
  }
  auto parsed = checkpoint::ParseLlama4Config(root.dump());
  EXPECT_FALSE(parsed.ok()) << field << " = " << value;
  return parsed.ok() ? "" : std::string(parsed.status().message());
}

TEST(Llama4ConfigTest, ParsesScoutWithHfDefaults) {
  auto c = checkpoint::ParseLlama4Config(kScoutTextConfig);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->base.num_hidden_layers, 48);
  EXPECT_EQ(c->base.head_dim, 128);
  EXPECT_EQ(c->num_local_experts, 16);
  EXPECT_TRUE(c->attn_temperature_tuning) << "HF tests the 4 for truth";
  ASSERT_TRUE(c->base.rope_scaling.has_value()) << "low = high freq factor (1.0) is Scout's and accepted";
  EXPECT_DOUBLE_EQ(c->base.rope_scaling->factor, 16.0);
  for (int64_t i = 0; i < 48; ++i) {
    EXPECT_TRUE(c->IsMoeLayer(i)) << i;  // interleave_moe_layer_step 1
    EXPECT_EQ(c->UsesRope(i), (i + 1) % 4 != 0) << i;  // no_rope_layers [] -> every fourth layer NoPE
    EXPECT_EQ(c->chunked_layers[i], c->UsesRope(i)) << i;
  }
  EXPECT_EQ(c->attention_chunk_size, 8192);
  // The synthetic real shape is this config, and writing then reading a config keeps every per-layer list.
  auto synthetic = Llama4SyntheticConfig("llama-4-scout", "bfloat16");
  ASSERT_TRUE(synthetic.ok());
  auto again = checkpoint::ParseLlama4Config(checkpoint::Llama4ConfigToJson(*synthetic));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->moe_layers, c->moe_layers);
  EXPECT_EQ(again->rope_layers, c->rope_layers);
  EXPECT_EQ(again->chunked_layers, c->chunked_layers);
  EXPECT_EQ(checkpoint::Llama4ModelTensors(*again).size(), checkpoint::Llama4ModelTensors(*c).size());
  // Maverick: dense and MoE layers alternate (interleave_moe_layer_step 2: layers 1, 3, ...).
  nlohmann::json maverick = nlohmann::json::parse(kScoutTextConfig);
  maverick["interleave_moe_layer_step"] = 2;
  maverick["num_local_experts"] = 128;
  auto m = checkpoint::ParseLlama4Config(maverick.dump());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_FALSE(m->IsMoeLayer(0));
  EXPECT_TRUE(m->IsMoeLayer(1));
  EXPECT_FALSE(m->IsMoeLayer(46));
  EXPECT_TRUE(m->IsMoeLayer(47));
}

TEST(Llama4ConfigTest, RefusesWhatItDoesNotBuildNamingTheFieldAndValue) {
  EXPECT_THAT(Refusal("hidden_act", R"("gelu")"), HasSubstr("\"hidden_act\" = \"gelu\""));
  EXPECT_THAT(Refusal("no_rope_layers", "[1, 0]"), HasSubstr("\"no_rope_layers\" = [1,0] is not a list of 48 entries"));
  nlohmann::json flags = nlohmann::json::array();
  for (int i = 0; i < 48; ++i) flags.push_back(i == 5 ? 2 : 1);
  EXPECT_THAT(Refusal("no_rope_layers", flags.dump()), HasSubstr("\"no_rope_layers[5]\" = 2 is not 0 or 1"));
  EXPECT_THAT(Refusal("moe_layers", "[0, 48]"), HasSubstr("\"moe_layers[1]\" = 48 is not a layer index in [0, 48)"));
  nlohmann::json types = nlohmann::json::array();
  for (int i = 0; i < 48; ++i) types.push_back(i == 3 ? "sliding_attention" : "full_attention");
  EXPECT_THAT(Refusal("layer_types", types.dump()), HasSubstr("\"layer_types[3]\" = \"sliding_attention\""));
  EXPECT_THAT(Refusal("attention_chunk_size", "null"), HasSubstr("\"attention_chunk_size\" is null but layer_types"));
  EXPECT_THAT(Refusal("num_experts_per_tok", "17"), HasSubstr("\"num_experts_per_tok\" = 17 exceeds num_local_experts = 16"));
  EXPECT_THAT(Refusal("floor_scale", "0"), HasSubstr("\"floor_scale\" = 0 must be positive"));
  EXPECT_THAT(Refusal("use_qk_norm", R"("yes")"), HasSubstr("\"use_qk_norm\" = \"yes\" is not a boolean"));
  EXPECT_THAT(Refusal("intermediate_size_mlp", "<erase>"), HasSubstr("\"intermediate_size_mlp\" is missing"));
  EXPECT_THAT(Refusal("num_local_experts", "0"), HasSubstr("\"num_local_experts\" = 0"));
  EXPECT_THAT(Refusal("rope_scaling", R"({"rope_type": "yarn", "factor": 8})"), HasSubstr("\"yarn\" is not supported"));
  EXPECT_THAT(Refusal("rope_parameters", R"({"rope_type": "dynamic", "rope_theta": 1e4})"),
              HasSubstr("\"rope_parameters.rope_type\" = \"dynamic\""));
  EXPECT_THAT(Refusal("model_type", R"("llama4")"), HasSubstr("the multimodal model"));
  EXPECT_THAT(Refusal("mlp_bias", "true"), HasSubstr("\"mlp_bias\" = true"));
  // Through ModelConfig (what the pipeline reads) the same refusal comes back.
  nlohmann::json root = nlohmann::json::parse(kScoutTextConfig);
  root["layer_types"] = types;
  EXPECT_THAT(std::string(checkpoint::ParseModelConfig(root.dump()).status().message()), HasSubstr("layer_types[3]"));
}

TEST(Llama4LayoutTest, InterleavedLayersAndScoutsParameterCount) {
  auto c = checkpoint::ParseLlama4Config(kScoutTextConfig);
  ASSERT_TRUE(c.ok());
  const auto moe = checkpoint::Llama4LayerLinears(*c, 0);
  ASSERT_EQ(moe.size(), 4u + 3 + 16 * 3);  // q, k, v, o; shared expert; 16 experts
  EXPECT_EQ(moe[1].out_features, 8 * 128);
  EXPECT_EQ(moe[4].relative_name, "feed_forward.shared_expert.gate_proj");
  EXPECT_FALSE(moe[4].routed);
  EXPECT_EQ(moe.back().relative_name, "feed_forward.experts.15.down_proj");
  EXPECT_TRUE(moe.back().routed);
  EXPECT_EQ(checkpoint::Llama4RouterTensors(*c, 0)[0].name, "model.layers.0.feed_forward.router.weight");
  int64_t params = 0;
  for (const auto& t : checkpoint::Llama4ModelTensors(*c)) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    params += n;
  }
  // Scout: 109B parameters with its vision tower (~1B); the text model 107.8B.
  EXPECT_NEAR(params / 1e9, 107.8, 0.1);
  nlohmann::json maverick = nlohmann::json::parse(kScoutTextConfig);
  maverick["interleave_moe_layer_step"] = 2;
  auto m = checkpoint::ParseLlama4Config(maverick.dump());
  ASSERT_TRUE(m.ok());
  const auto dense = checkpoint::Llama4LayerLinears(*m, 0);
  ASSERT_EQ(dense.size(), 4u + 3);
  EXPECT_EQ(dense[4].relative_name, "feed_forward.gate_proj");
  EXPECT_EQ(dense[4].out_features, 16384);
  EXPECT_TRUE(checkpoint::Llama4RouterTensors(*m, 0).empty());
}

TEST(Llama4AttentionTest, ChunkedMaskAndTemperature) {
  const at::Tensor mask = ChunkedCausalMask(5, 2);
  // Chunks {0, 1}, {2, 3}, {4}: query 3 sees keys 2 and 3 only.
  EXPECT_EQ(mask[3][2].item<float>(), 0.0f);
  EXPECT_EQ(mask[3][3].item<float>(), 0.0f);
  EXPECT_TRUE(std::isinf(mask[3][1].item<float>()));
  EXPECT_TRUE(std::isinf(mask[2][3].item<float>()));
  EXPECT_TRUE(std::isinf(mask[4][3].item<float>()));
  const at::Tensor t = AttentionTemperature(9, 4, 0.1);
  EXPECT_FLOAT_EQ(t[2].item<float>(), 1.0f);                                         // floor(3 / 4) = 0
  EXPECT_FLOAT_EQ(t[3].item<float>(), static_cast<float>(std::log1p(1.0) * 0.1 + 1));  // floor(4 / 4) = 1
  EXPECT_FLOAT_EQ(t[8].item<float>(), static_cast<float>(std::log1p(2.0) * 0.1 + 1));
}

// `quark make-model --arch llama4 --shape tiny --dtype f32 --seed 7` in a temporary folder.
class Llama4ReferenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::InitTestEngine();
    dir_ = fs::temp_directory_path() / ("quark_llama4_reference_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    SyntheticModelOptions options;
    options.arch = "llama4";
    options.shape = "tiny";
    options.dtype = "f32";
    options.seed = 7;
    options.out_dir = dir_.string();
    ASSERT_TRUE(MakeSyntheticModel(options).ok());
    std::ifstream(dir_ / "config.json") >> original_config_;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The windows tests/peers/llama4/hf_llama4_reference.py computes: (i * 7919 + 13 + w * 101) % 512, i < 16.
  static at::Tensor Windows() {
    at::Tensor ids = at::empty({2, 16}, at::kLong);
    for (int64_t w = 0; w < 2; ++w) {
      for (int64_t i = 0; i < 16; ++i) ids[w][i] = (i * 7919 + 13 + w * 101) % 512;
    }
    return ids;
  }
  static at::Tensor Reference() {
    const std::string path = std::string(QUARK_LLAMA4_TEST_DATA) + "/llama4_tiny_seed7_logits.f64";
    std::ifstream in(path, std::ios::binary);
    at::Tensor logits = at::empty({2, 16, 512}, at::kDouble);
    in.read(static_cast<char*>(logits.data_ptr()), logits.numel() * 8);
    EXPECT_TRUE(in.good()) << "cannot read " << path;
    return logits;
  }
  // Logits with config.json edited by `edit` (one feature switched off) or, with `outputs_weighted`, every MoE block
  // weighting its experts' outputs (Mixtral's way) instead of their inputs.
  at::Tensor Logits(const std::function<void(nlohmann::json&)>& edit = nullptr, bool outputs_weighted = false) {
    nlohmann::json config = original_config_;
    if (edit) edit(config);
    std::ofstream(dir_ / "config.json") << config.dump(2);
    auto lm = CausalLm::Open(dir_.string(), at::kFloat);
    EXPECT_TRUE(lm.ok()) << lm.status();
    if (!lm.ok()) return at::Tensor();
    for (const auto& layer : (*lm)->layers()) {
      auto* l4 = dynamic_cast<Llama4DecoderLayer*>(layer.get());
      EXPECT_NE(l4, nullptr);
      if (outputs_weighted && l4 != nullptr && l4->moe) l4->moe->set_weights_scale_inputs(false);
    }
    auto logits = (*lm)->Forward(Windows());
    EXPECT_TRUE(logits.ok()) << logits.status();
    return logits.ok() ? logits->to(at::kDouble) : at::Tensor();
  }

  fs::path dir_;
  nlohmann::json original_config_;
};

TEST_F(Llama4ReferenceTest, LogitsMatchHuggingFacesLlama4ForCausalLM) {
  const at::Tensor reference = Reference();
  ASSERT_GT(reference.abs().max().item<double>(), 0.1);  // not a degenerate model
  const at::Tensor logits = Logits();
  ASSERT_TRUE(logits.defined());
  for (int64_t w = 0; w < 2; ++w) {
    const double diff = (logits.select(0, w) - reference.select(0, w)).abs().max().item<double>();
    EXPECT_LT(diff, 1e-5) << w;
    std::cout << "window " << w << ": max |logits - HF's| = " << diff << "\n";
  }
}

TEST_F(Llama4ReferenceTest, EachLlama4DetailMovesTheLogitsBeyondTheBound) {
  const at::Tensor reference = Reference();
  const auto moved = [&reference](const at::Tensor& logits) { return (logits - reference).abs().max().item<double>(); };
  const double qk_norm = moved(Logits([](nlohmann::json& c) { c["use_qk_norm"] = false; }));
  const double temperature = moved(Logits([](nlohmann::json& c) { c["attn_temperature_tuning"] = false; }));
  const double chunking = moved(Logits([](nlohmann::json& c) { c["attention_chunk_size"] = 16; }));
  const double nope = moved(Logits([](nlohmann::json& c) {
    c["no_rope_layers"] = {1, 1, 1, 1};  // layer 2 applies RoPE (and the QK norm) too, with full attention
    c.erase("layer_types");
    c["layer_types"] = {"chunked_attention", "chunked_attention", "full_attention", "chunked_attention"};
  }));
  const double weighted_outputs = moved(Logits(nullptr, /*outputs_weighted=*/true));
  std::cout << "moved by: qk_norm " << qk_norm << ", temperature " << temperature << ", chunking " << chunking
            << ", NoPE " << nope << ", output weighting " << weighted_outputs << "\n";
  // Ten times the bound at least (temperature tuning moves least: it acts in the one NoPE layer, from position 3 on).
  for (double d : {qk_norm, temperature, chunking, nope, weighted_outputs}) EXPECT_GT(d, 1e-4);
}

}  // namespace
}  // namespace quark::runtime
