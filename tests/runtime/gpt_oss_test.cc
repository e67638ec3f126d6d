// gpt-oss (#32): config parsing and its refusals naming the field, the checkpoint layout (fused experts), the clamped
// SwiGLU and the sink attention against their formulas, the routing, calibration coverage of every expert, and the
// runtime's logits against Hugging Face's own modeling_gpt_oss.py run in float64
// (tests/peers/hf_gpt_oss/make_reference.sh; its output for the tiny seed-7 model is committed in data/).
#include <cmath>
#include <fstream>
#include <iostream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/checkpoint/gpt_oss_config.h"
#include "core/checkpoint/gpt_oss_layout.h"
#include "core/runtime/attention.h"
#include "core/runtime/gpt_oss_attention.h"
#include "core/runtime/gpt_oss_layer.h"
#include "core/runtime/gpt_oss_model.h"
#include "core/runtime/gpt_oss_synthetic.h"
#include "core/runtime/yarn_rope.h"
#include "tests/runtime/gpt_oss_reference.h"
#include "tests/runtime/gpt_oss_test_models.h"
#include "tests/runtime/test_paths.h"

namespace quark::runtime {
namespace {

using ::testing::HasSubstr;

// openai/gpt-oss-20b's config.json as HF ships it, its quantization_config (MXFP4 experts) left out here.
constexpr char kGptOss20bConfig[] = R"({"architectures": ["GptOssForCausalLM"], "attention_bias": true,
  "attention_dropout": 0.0, "eos_token_id": 200002, "experts_per_token": 4, "head_dim": 64, "hidden_act": "silu",
  "hidden_size": 2880, "initial_context_length": 4096, "initializer_range": 0.02, "intermediate_size": 2880,
  "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention", "sliding_attention",
  "full_attention", "sliding_attention", "full_attention", "sliding_attention", "full_attention", "sliding_attention",
  "full_attention", "sliding_attention", "full_attention", "sliding_attention", "full_attention", "sliding_attention",
  "full_attention", "sliding_attention", "full_attention", "sliding_attention", "full_attention", "sliding_attention",
  "full_attention"], "max_position_embeddings": 131072, "model_type": "gpt_oss", "num_attention_heads": 64,
  "num_experts_per_tok": 4, "num_hidden_layers": 24, "num_key_value_heads": 8, "num_local_experts": 32,
  "output_router_logits": false, "pad_token_id": 199999, "rms_norm_eps": 1e-05, "rope_scaling": {"beta_fast": 32.0,
  "beta_slow": 1.0, "factor": 32.0, "original_max_position_embeddings": 4096, "rope_type": "yarn", "truncate": false},
  "rope_theta": 150000, "router_aux_loss_coef": 0.9, "sliding_window": 128, "swiglu_limit": 7.0,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "use_cache": true, "vocab_size": 201088})";

using testing::GptOssReferenceIds;
using testing::GptOssReferenceLogits;

class GptOssTest : public ::testing::Test {
 protected:
  void SetUp() override { testing::InitTestEngine(); }
};

TEST(GptOssConfigTest, ParsesTheReleasedConfig) {
  auto c = checkpoint::ParseGptOssConfig(kGptOss20bConfig);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->base.num_hidden_layers, 24);
  EXPECT_EQ(c->base.head_dim, 64);
  EXPECT_EQ(c->base.num_key_value_heads, 8);
  EXPECT_TRUE(c->base.attention_bias);
  EXPECT_TRUE(c->base.o_proj_bias);
  EXPECT_EQ(c->num_local_experts, 32);
  EXPECT_EQ(c->num_experts_per_tok, 4);
  EXPECT_DOUBLE_EQ(c->swiglu_limit, 7.0);
  EXPECT_DOUBLE_EQ(c->swiglu_alpha, 1.702);
  EXPECT_EQ(c->LayerWindow(0), 128);
  EXPECT_EQ(c->LayerWindow(1), 0);
  EXPECT_EQ(c->LayerWindow(22), 128);
  ASSERT_TRUE(c->yarn.has_value());
  EXPECT_FALSE(c->yarn->truncate);
  EXPECT_DOUBLE_EQ(c->base.rope_theta, 150000);
  // YaRN's cos/sin multiplier 0.1 ln 32 + 1 (no mscale given).
  EXPECT_NEAR(YarnRopeFrequencies(c->yarn, 64, 150000).attention_factor, 0.1 * std::log(32.0) + 1, 1e-15);
  // The synthetic real shape is this config; its JSON reads back the same.
  auto synthetic = GptOssSyntheticConfig("gpt-oss-20b", "bfloat16");
  ASSERT_TRUE(synthetic.ok());
  auto again = checkpoint::ParseGptOssConfig(checkpoint::GptOssConfigToJson(*synthetic));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(checkpoint::GptOssModelTensors(*again).size(), checkpoint::GptOssModelTensors(*c).size());
  EXPECT_EQ(again->base.sliding_window_layers, c->base.sliding_window_layers);
  EXPECT_EQ(again->yarn->original_max_position_embeddings, 4096);
  EXPECT_FALSE(again->yarn->truncate);
  EXPECT_FALSE(c->mxfp4_experts);
  // OpenAI's release ships its experts in MXFP4 (runtime/mxfp4_expert_source.h reads them).
  nlohmann::json released = nlohmann::json::parse(kGptOss20bConfig);
  released["quantization_config"] = {{"quant_method", "mxfp4"},
                                     {"modules_to_not_convert", {"model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                                 "model.embed_tokens", "lm_head"}}};
  auto mxfp4 = checkpoint::ParseGptOssConfig(released.dump());
  ASSERT_TRUE(mxfp4.ok()) << mxfp4.status();
  EXPECT_TRUE(mxfp4->mxfp4_experts);
  // Absent layer_types: HF's default alternation (even layers sliding); newer transformers' rope_parameters.
  nlohmann::json root = nlohmann::json::parse(kGptOss20bConfig);
  root.erase("layer_types");
  root["rope_parameters"] = root["rope_scaling"];
  root["rope_parameters"]["rope_theta"] = 150000;
  root.erase("rope_scaling");
  root.erase("rope_theta");
  auto defaults = checkpoint::ParseGptOssConfig(root.dump());
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->base.sliding_window_layers, c->base.sliding_window_layers);
  EXPECT_DOUBLE_EQ(defaults->yarn->factor, 32);
  EXPECT_DOUBLE_EQ(defaults->base.rope_theta, 150000);
}

TEST(GptOssConfigTest, RefusesWhatItDoesNotBuildNamingTheFieldAndValue) {
  const auto with = [](const std::string& field, const std::string& value) {
    nlohmann::json root = nlohmann::json::parse(kGptOss20bConfig);
    if (field.rfind("rope_scaling.", 0) == 0) {
      root["rope_scaling"][field.substr(13)] = nlohmann::json::parse(value);
    } else {
      root[field] = nlohmann::json::parse(value);
    }
    auto parsed = checkpoint::ParseGptOssConfig(root.dump());
    EXPECT_FALSE(parsed.ok()) << field << " = " << value;
    return std::string(parsed.status().message());
  };
  EXPECT_THAT(with("quantization_config", R"({"quant_method": "fp8"})"),
              HasSubstr("\"quantization_config.quant_method\" = \"fp8\" is not a gpt_oss source read here"));
  EXPECT_THAT(with("quantization_config", R"({"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.mlp.experts"]})"),
              HasSubstr("\"quantization_config.modules_to_not_convert\" names \"model.layers.*.mlp.experts\""));
  EXPECT_THAT(with("rope_scaling.rope_type", R"("linear")"), HasSubstr("rope_scaling.type\" = \"linear\" is not supported for gpt_oss"));
  EXPECT_THAT(with("rope_scaling.factor", "16"), HasSubstr("\"rope_scaling.factor\" = 16 differs"));
  EXPECT_THAT(with("layer_types", R"(["sliding_attention"])"), HasSubstr("\"layer_types\" = [\"sliding_attention\"] is not a list of 24"));
  nlohmann::json types = nlohmann::json::parse(kGptOss20bConfig)["layer_types"];
  types[3] = "chunked_attention";
  EXPECT_THAT(with("layer_types", types.dump()), HasSubstr("\"layer_types[3]\" = \"chunked_attention\""));
  EXPECT_THAT(with("sliding_window", "null"), HasSubstr("\"sliding_window\" is null but layer 0 is a sliding_attention layer"));
  EXPECT_THAT(with("num_experts_per_tok", "33"), HasSubstr("\"num_experts_per_tok\" = 33 exceeds num_local_experts = 32"));
  EXPECT_THAT(with("experts_per_token", "2"), HasSubstr("\"experts_per_token\" = 2 differs from num_experts_per_tok = 4"));
  EXPECT_THAT(with("num_local_experts", "0"), HasSubstr("\"num_local_experts\" = 0 must be positive"));
  EXPECT_THAT(with("swiglu_limit", "0"), HasSubstr("\"swiglu_limit\" = 0 must be positive"));
  EXPECT_THAT(with("swiglu_alpha", R"("fast")"), HasSubstr("\"swiglu_alpha\" = \"fast\" is not a number"));
  EXPECT_THAT(with("hidden_act", R"("gelu")"), HasSubstr("\"hidden_act\" = \"gelu\""));
  EXPECT_THAT(with("attention_dropout", "0.1"), HasSubstr("\"attention_dropout\" = 0.1 is not supported"));
  EXPECT_THAT(with("model_type", R"("gpt2")"), HasSubstr("\"model_type\" = \"gpt2\" is not gpt_oss"));
}

TEST(GptOssLayoutTest, FusedExpertsInTheCheckpointLinearsPerExpertInTheRuntime) {
  auto c = GptOssSyntheticConfig("tiny", "float32");
  ASSERT_TRUE(c.ok());
  const auto linears = checkpoint::GptOssLayerLinears(*c);
  ASSERT_EQ(linears.size(), 4u + 2u * 8u);
  EXPECT_EQ(linears[0].relative_name, "self_attn.q_proj");
  EXPECT_EQ(linears[0].out_features, 96);  // 6 heads of 16: wider than hidden 64
  EXPECT_TRUE(linears[3].has_bias);
  EXPECT_EQ(linears[4].relative_name, "mlp.experts.0.gate_up_proj");
  EXPECT_EQ(linears[4].out_features, 64);
  EXPECT_TRUE(linears[4].routed);
  EXPECT_EQ(linears[5].relative_name, "mlp.experts.0.down_proj");
  EXPECT_EQ(linears[5].in_features, 32);
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& t : checkpoint::GptOssModelTensors(*c)) shapes[t.name] = t.shape;
  EXPECT_EQ(shapes.at("model.layers.2.mlp.experts.gate_up_proj"), (std::vector<int64_t>{8, 64, 64}));
  EXPECT_EQ(shapes.at("model.layers.2.mlp.experts.down_proj"), (std::vector<int64_t>{8, 32, 64}));
  EXPECT_EQ(shapes.at("model.layers.2.mlp.experts.down_proj_bias"), (std::vector<int64_t>{8, 64}));
  EXPECT_EQ(shapes.at("model.layers.0.self_attn.sinks"), (std::vector<int64_t>{6}));
  EXPECT_EQ(shapes.at("model.layers.0.mlp.router.bias"), (std::vector<int64_t>{8}));
  EXPECT_EQ(shapes.count("model.layers.0.mlp.experts.0.gate_up_proj.weight"), 0u);
  EXPECT_EQ(shapes.count("lm_head.weight"), 1u);
}

TEST_F(GptOssTest, ClampedSwiGluOnInterleavedColumnsMatchesItsFormula) {
  // Identity gate_up (2 I = 2 x 3 rows over a 6-wide input) so x's columns are the interleaved gate/up values.
  GptOssExpert expert(1.702, 7.0);
  expert.gate_up_proj = std::make_shared<FloatLinear>(at::eye(6, at::kDouble), at::Tensor());
  expert.down_proj = std::make_shared<FloatLinear>(at::eye(3, at::kDouble), at::zeros({3}, at::kDouble));
  const at::Tensor x = at::tensor({9.0, -9.0, -2.0, 8.0, 0.5, 0.25}, at::kDouble).view({1, 6});
  const at::Tensor y = expert.forward(x);
  const auto swiglu = [](double gate, double up) {
    gate = std::min(gate, 7.0);
    up = std::max(-7.0, std::min(up, 7.0));
    return (up + 1) * gate / (1 + std::exp(-1.702 * gate));
  };
  EXPECT_NEAR(y[0][0].item<double>(), swiglu(9.0, -9.0), 1e-12);  // gate clamped to 7, up to -7
  EXPECT_NEAR(y[0][1].item<double>(), swiglu(-2.0, 8.0), 1e-12);  // gate unclamped below, up clamped to 7
  EXPECT_NEAR(y[0][2].item<double>(), swiglu(0.5, 0.25), 1e-12);
}

TEST_F(GptOssTest, SinksTakeTheirShareOfEachRowsSoftmax) {
  const at::Tensor q = at::randn({1, 2, 5, 4}, at::kDouble), k = at::randn({1, 1, 5, 4}, at::kDouble);
  const at::Tensor v = at::randn({1, 1, 5, 4}, at::kDouble);
  const at::Tensor mask = CausalMask(5, 3);
  // A sink of -inf takes nothing: plain causal attention.
  const at::Tensor none = SinkAttention(q, k, v, mask, at::full({2}, -INFINITY, at::kDouble), 0.5);
  EXPECT_TRUE(at::allclose(none, CausalAttention(q, k, v, mask, 0.5), 1e-6, 1e-6));  // its softmax is float32
  // Otherwise row i's weights are exp(s_ij) / (sum_j exp(s_ij) + exp(sink)).
  const at::Tensor sinks = at::tensor({0.3, -1.5}, at::kDouble);
  const at::Tensor out = SinkAttention(q, k, v, mask, sinks, 0.5).view({5, 2, 4});
  for (int64_t h = 0; h < 2; ++h) {
    const at::Tensor scores = at::matmul(q[0][h], k[0][0].t()) * 0.5 + mask.to(at::kDouble);  // [5, 5]
    const at::Tensor e = scores.exp();
    const at::Tensor weights = e / (e.sum(-1, true) + std::exp(sinks[h].item<double>()));
    EXPECT_TRUE(at::allclose(out.select(1, h), at::matmul(weights, v[0][0]), 1e-12, 1e-12)) << h;
  }
}

TEST_F(GptOssTest, RoutingSoftmaxesTheTopKLogitsWithTheRouterBias) {
  const at::Tensor router = at::eye(4, at::kDouble);
  const at::Tensor bias = at::tensor({0.0, 0.0, 0.0, 3.0}, at::kDouble);
  const at::Tensor x = at::tensor({2.0, 1.0, 0.5, 0.0}, at::kDouble).view({1, 4});
  const MoeBlock::Routing r = GptOssRouting(2, bias)(x, router);
  // Logits 2, 1, 0.5, 3: the bias makes expert 3 the first choice, then expert 0.
  EXPECT_EQ(r.selected[0][0].item<int64_t>(), 3);
  EXPECT_EQ(r.selected[0][1].item<int64_t>(), 0);
  EXPECT_NEAR(r.weights[0][0].item<double>(), 1 / (1 + std::exp(-1.0)), 1e-12);
  EXPECT_NEAR(r.weights.sum().item<double>(), 1.0, 1e-12);
  EXPECT_NEAR(r.scores[0][3].item<double>(), 3.0, 1e-6);
}

TEST_F(GptOssTest, LogitsMatchHuggingFacesModelingCode) {
  const testing::TinyGptOss model("reference", 7);
  const at::Tensor ids = GptOssReferenceIds();
  const at::Tensor reference = GptOssReferenceLogits();
  ASSERT_GT(reference.abs().max().item<double>(), 0.1);  // not a degenerate model
  auto logits64 = GptOssLogits(model.config, *model.weights, ids, at::kDouble);
  ASSERT_TRUE(logits64.ok()) << logits64.status();
  auto logits32 = GptOssLogits(model.config, *model.weights, ids, at::kFloat);
  ASSERT_TRUE(logits32.ok()) << logits32.status();
  const double diff64 = (*logits64 - reference).abs().max().item<double>();
  const double diff32 = (logits32->to(at::kDouble) - reference).abs().max().item<double>();
  std::cout << "max |logits - HF| float64 " << diff64 << ", float32 " << diff32 << "\n";
  // HF's RMSNorm and RoPE tables compute in float32 even in a float64 model: that rounding is all that remains.
  EXPECT_LT(diff64, 1e-5);
  EXPECT_LT(diff32, 1e-5);
  // Each gpt-oss detail moves the logits well beyond that bound, so none can be wrong unnoticed.
  const auto moved = [&](checkpoint::GptOssConfig changed) {
    auto logits = GptOssLogits(changed, *model.weights, ids, at::kDouble);
    EXPECT_TRUE(logits.ok()) << logits.status();
    const double diff = (*logits - reference).abs().max().item<double>();
    std::cout << "  moved by " << diff << "\n";
    return diff;
  };
  checkpoint::GptOssConfig changed = model.config;
  changed.base.sliding_window = 0;
  EXPECT_GT(moved(changed), 1e-4) << "sliding window";
  changed = model.config;
  changed.yarn.reset();
  EXPECT_GT(moved(changed), 1e-4) << "yarn";
  changed = model.config;
  changed.yarn->truncate = true;
  EXPECT_GT(moved(changed), 1e-5) << "yarn truncate";
  changed = model.config;
  changed.num_experts_per_tok = 3;
  EXPECT_GT(moved(changed), 1e-4) << "top-k";
  changed = model.config;
  changed.swiglu_alpha = 1.0;
  EXPECT_GT(moved(changed), 1e-4) << "swiglu_alpha";
  // (swiglu_limit: the random weights keep |gate|, |up| far below 7; the clamp is held to its formula above.)
}

TEST_F(GptOssTest, CalibrationCoversEveryExpertAndMisShapedTensorsAreNamed) {
  const testing::TinyGptOss model("coverage", 3);
  auto layer = GptOssDecoderLayer::Load(model.config, 1, *model.weights, at::kFloat);
  ASSERT_TRUE(layer.ok()) << layer.status();
  const auto specs = checkpoint::GptOssLayerLinears(model.config);
  const auto linears = (*layer)->NamedLinears();
  ASSERT_EQ(linears.size(), specs.size());
  for (size_t i = 0; i < specs.size(); ++i) EXPECT_EQ(linears[i].relative_name, specs[i].relative_name);
  EXPECT_EQ((*layer)->FindLinear("mlp.router"), nullptr);
  // Expert 5's gate_up linear is the transposed slice of the fused tensor, bias included.
  auto fused = model.weights->Get("model.layers.1.mlp.experts.gate_up_proj", at::kFloat);
  ASSERT_TRUE(fused.ok());
  EXPECT_TRUE(at::equal((*layer)->FindLinear("mlp.experts.5.gate_up_proj")->weight(), (*fused)[5].t()));
  EXPECT_EQ((*layer)->self_attn->window(), 0);  // layer 1: full attention
  const LayerContext context = GptOssLayerContext(model.config, 6, at::kFloat);
  const at::Tensor hidden = at::randn({1, 6, 64}, at::kFloat);
  const at::Tensor before = (*layer)->forward(hidden, context);
  (*layer)->BeginCalibration(4);
  const at::Tensor during = (*layer)->forward(hidden, context);
  const auto coverage = (*layer)->FinishCalibration();
  EXPECT_TRUE(at::equal(before, during));
  ASSERT_EQ(coverage.size(), 1u);
  EXPECT_EQ(coverage[0].block, "model.layers.1.mlp");
  ASSERT_EQ(coverage[0].experts.size(), 8u);
  int64_t routed = 0;
  for (size_t e = 0; e < 8; ++e) {
    EXPECT_GE(coverage[0].routed[e] + coverage[0].topped_up[e], 4) << e;
    routed += coverage[0].routed[e];
  }
  EXPECT_EQ(routed, 6 * 2);
  // A checkpoint whose tensor disagrees with config.json: the tensor and both shapes are named.
  checkpoint::GptOssConfig wrong = model.config;
  wrong.base.intermediate_size = 24;
  EXPECT_THAT(std::string(GptOssDecoderLayer::Load(wrong, 0, *model.weights, at::kFloat).status().message()),
              HasSubstr("tensor \"model.layers.0.mlp.experts.gate_up_proj\" has shape [8, 64, 64] but config.json implies [8, 64, 48]"));
}

}  // namespace
}  // namespace quark::runtime
