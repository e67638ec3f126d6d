// DeepSeek-V3 (#32): config parsing and its refusals naming the field, the checkpoint layout (MTP layers apart), the
// runtime's logits against a float64 NumPy port of HF's DeepseekV3ForCausalLM (tests/runtime/deepseek_v3_reference.py,
// its output committed in data/), the group-limited sigmoid routing, and calibration coverage of every expert.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <gmock/gmock.h>
#include <nlohmann/json.hpp>
#include <gtest/gtest.h>

#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/deepseek_config.h"
#include "core/checkpoint/deepseek_layout.h"
#include "core/estimate/deepseek_shape.h"
#include "core/runtime/deepseek_attention.h"
#include "core/runtime/deepseek_layer.h"
#include "core/runtime/deepseek_model.h"
#include "core/runtime/deepseek_synthetic.h"
#include "core/runtime/synthetic_model.h"
#include "tests/runtime/deepseek_test_models.h"
#include "tests/runtime/test_paths.h"

namespace quark::runtime {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// The released DeepSeek-V3 config.json (the fields the runtime reads; quantization_config left out).
constexpr char kDeepseekV3Config[] = R"({"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
  "bos_token_id": 0, "eos_token_id": 1, "first_k_dense_replace": 3, "hidden_act": "silu", "hidden_size": 7168,
  "intermediate_size": 18432, "kv_lora_rank": 512, "max_position_embeddings": 163840, "moe_intermediate_size": 2048,
  "moe_layer_freq": 1, "n_group": 8, "n_routed_experts": 256, "n_shared_experts": 1, "norm_topk_prob": true,
  "num_attention_heads": 128, "num_experts_per_tok": 8, "num_hidden_layers": 61, "num_key_value_heads": 128,
  "num_nextn_predict_layers": 1, "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
  "rms_norm_eps": 1e-06, "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0,
  "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096, "type": "yarn"}, "rope_theta": 10000,
  "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "tie_word_embeddings": false, "topk_group": 4,
  "topk_method": "noaux_tc", "torch_dtype": "bfloat16", "v_head_dim": 128, "vocab_size": 129280})";

// The windows tests/runtime/data/deepseek_v3_tiny_seed7_logits.f64 was computed for (see deepseek_v3_reference.py).
std::vector<std::vector<int64_t>> ReferenceWindows() {
  std::vector<std::vector<int64_t>> windows(2);
  for (int64_t w = 0; w < 2; ++w) {
    for (int64_t i = 0; i < 16; ++i) windows[w].push_back((i * 7919 + 13 + w * 101) % 512);
  }
  return windows;
}

at::Tensor ReferenceLogits(const std::string& shape) {
  const std::string path = std::string(QUARK_DEEPSEEK_TEST_DATA) + "/deepseek_v3_" + shape + "_seed7_logits.f64";
  std::ifstream in(path, std::ios::binary);
  at::Tensor logits = at::empty({2, 16, 512}, at::kDouble);
  in.read(static_cast<char*>(logits.data_ptr()), logits.numel() * 8);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  return logits;
}

class DeepseekTest : public ::testing::Test {
 protected:
  void SetUp() override { testing::InitTestEngine(); }
};

TEST(DeepseekConfigTest, ParsesTheReleasedConfig) {
  auto c = checkpoint::ParseDeepseekConfig(kDeepseekV3Config);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->base.num_hidden_layers, 61);
  EXPECT_EQ(c->q_lora_rank, 1536);
  EXPECT_EQ(c->qk_head_dim(), 192);
  EXPECT_EQ(c->n_routed_experts, 256);
  EXPECT_EQ(c->first_k_dense_replace, 3);
  EXPECT_EQ(c->num_nextn_predict_layers, 1);
  EXPECT_DOUBLE_EQ(c->routed_scaling_factor, 2.5);
  EXPECT_TRUE(c->rope_interleave);
  ASSERT_TRUE(c->yarn.has_value());
  EXPECT_DOUBLE_EQ(c->yarn->factor, 40);
  EXPECT_FALSE(c->IsMoeLayer(2));
  EXPECT_TRUE(c->IsMoeLayer(3));
  // mscale = mscale_all_dim: cos/sin unscaled; the softmax scale is 192^-0.5 * (0.1 ln 40 + 1)^2.
  EXPECT_DOUBLE_EQ(DeepseekRopeFrequencies(*c).attention_factor, 1.0);
  const double m = 0.1 * std::log(40.0) + 1.0;
  EXPECT_NEAR(DeepseekSoftmaxScale(*c), m * m / std::sqrt(192.0), 1e-15);
  // The synthetic real shape is this config.
  auto synthetic = DeepseekSyntheticConfig("deepseek-v3", "bfloat16");
  ASSERT_TRUE(synthetic.ok());
  auto again = checkpoint::ParseDeepseekConfig(checkpoint::DeepseekConfigToJson(*synthetic));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(checkpoint::DeepseekModelTensors(*again).size(), checkpoint::DeepseekModelTensors(*c).size());
  EXPECT_EQ(again->kv_lora_rank, c->kv_lora_rank);
  EXPECT_EQ(again->n_group, c->n_group);
  EXPECT_EQ(again->topk_group, c->topk_group);
  EXPECT_EQ(again->yarn->original_max_position_embeddings, 4096);
}

TEST(DeepseekConfigTest, RefusesWhatItDoesNotBuildNamingTheFieldAndValue) {
  const std::string config = kDeepseekV3Config;
  const auto with = [&config](const std::string& field, const std::string& value) {
    nlohmann::json root = nlohmann::json::parse(config);
    if (field.rfind("rope_scaling.", 0) == 0) {
      root["rope_scaling"][field.substr(13)] = nlohmann::json::parse(value);
    } else {
      root[field] = nlohmann::json::parse(value);
    }
    auto parsed = checkpoint::ParseDeepseekConfig(root.dump());
    EXPECT_FALSE(parsed.ok()) << field << " = " << value;
    return std::string(parsed.status().message());
  };
  EXPECT_THAT(with("scoring_func", R"("softmax")"), HasSubstr("\"scoring_func\" = \"softmax\""));
  EXPECT_THAT(with("topk_method", R"("greedy")"), HasSubstr("\"topk_method\" = \"greedy\""));
  EXPECT_THAT(with("rope_scaling.type", R"("linear")"), HasSubstr("rope_scaling.type\" = \"linear\""));
  EXPECT_THAT(with("n_group", "3"), HasSubstr("\"n_group\" = 3 does not divide n_routed_experts = 256"));
  EXPECT_THAT(with("topk_group", "9"), HasSubstr("\"topk_group\" = 9 exceeds n_group = 8"));
  EXPECT_THAT(with("num_experts_per_tok", "200"), HasSubstr("\"num_experts_per_tok\" = 200 exceeds the 128 experts"));
  EXPECT_THAT(with("moe_layer_freq", "2"), HasSubstr("\"moe_layer_freq\" = 2"));
  EXPECT_THAT(with("first_k_dense_replace", "62"), HasSubstr("\"first_k_dense_replace\" = 62"));
  EXPECT_THAT(with("num_key_value_heads", "8"), HasSubstr("\"num_key_value_heads\" = 8"));
  EXPECT_THAT(with("qk_rope_head_dim", "63"), HasSubstr("\"qk_rope_head_dim\" = 63 must be even"));
  EXPECT_THAT(with("kv_lora_rank", "0"), HasSubstr("\"kv_lora_rank\" = 0 must be positive"));
  EXPECT_THAT(with("routed_scaling_factor", "-1"), HasSubstr("\"routed_scaling_factor\" = -1"));
  EXPECT_THAT(with("hidden_act", R"("gelu")"), HasSubstr("\"hidden_act\" = \"gelu\""));
  EXPECT_THAT(with("rope_scaling.factor", "8"), HasSubstr("rope_scaling.factor\" = 8 differs from"));
  EXPECT_THAT(with("n_routed_experts", "100000"), HasSubstr("\"n_routed_experts\" = 100000 is above the limit"));
  nlohmann::json missing = nlohmann::json::parse(config);
  missing.erase("v_head_dim");
  EXPECT_THAT(std::string(checkpoint::ParseDeepseekConfig(missing.dump()).status().message()),
              HasSubstr("\"v_head_dim\" is missing"));
}

TEST(DeepseekLayoutTest, DenseAndMoeLayersAndTheMtpLayerApart) {
  auto c = checkpoint::ParseDeepseekConfig(kDeepseekV3Config);
  ASSERT_TRUE(c.ok());
  // Attention: q_a, kv_a, q_b, kv_b, o; dense MLP: 3; MoE: 3 shared + 256 x 3.
  EXPECT_EQ(checkpoint::DeepseekLayerLinears(*c, 0).size(), 5u + 3);
  const auto moe = checkpoint::DeepseekLayerLinears(*c, 3);
  ASSERT_EQ(moe.size(), 5u + 3 + 256 * 3);
  EXPECT_EQ(moe[3].relative_name, "self_attn.kv_b_proj");
  EXPECT_EQ(moe[3].out_features, 128 * (128 + 128));
  EXPECT_EQ(moe[3].in_features, 512);
  EXPECT_EQ(moe[1].out_features, 512 + 64);
  EXPECT_TRUE(moe.back().routed);
  EXPECT_TRUE(checkpoint::IsDeepseekMtpTensor(*c, "model.layers.61.eh_proj.weight"));
  EXPECT_FALSE(checkpoint::IsDeepseekMtpTensor(*c, "model.layers.60.mlp.gate.weight"));
  EXPECT_FALSE(checkpoint::IsDeepseekMtpTensor(*c, "model.norm.weight"));
  int64_t params = 0, mtp = 0;
  for (const auto& t : checkpoint::DeepseekModelTensors(*c)) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    (checkpoint::IsDeepseekMtpTensor(*c, t.name) ? mtp : params) += n;
  }
  // DeepSeek-V3: 671B parameters in the main model, 14B in the MTP module (its report's figures).
  EXPECT_NEAR(params / 1e9, 671.0, 1.0);
  EXPECT_NEAR(mtp / 1e9, 14.0, 2.0);
}

TEST(DeepseekEstimateTest, TheEstimatorSeesTheMoeLayerAsTheLargestAndNotTheMtpLayer) {
  auto c = checkpoint::ParseDeepseekConfig(kDeepseekV3Config);
  ASSERT_TRUE(c.ok());
  const estimate::ModelShape shape = estimate::DeepseekModelShape(*c, checkpoint::StDType::kBF16);
  EXPECT_EQ(shape.num_layers, 61);
  EXPECT_EQ(shape.config.num_experts, 256);
  // One MoE layer: attention 187M + shared expert 44M + 256 x 44M experts + router.
  const int64_t attention = 7168 * 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 * 128 * 256 + 128 * 128 * 7168;
  const int64_t expert = 3 * 7168 * 2048;
  EXPECT_EQ(shape.max_layer_params, attention + 257 * expert + 256 * 7168 + 256 + 2 * 7168 + 1536 + 512);
  EXPECT_EQ(shape.weight_bytes, static_cast<uint64_t>(shape.params_total) * 2);
  for (const auto& m : shape.modules) EXPECT_EQ(m.name.find("layers.61."), std::string::npos) << m.name;
  EXPECT_EQ(shape.modules.back().name, "lm_head");
}

class DeepseekReferenceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { testing::InitTestEngine(); }
};

// tiny: q_a/q_b LoRA, YaRN with mscale apart from mscale_all_dim, 4 groups of 4 experts with 2 kept, an MTP layer in
// the checkpoint; tiny-q-proj: a plain q_proj, v_head_dim above the q/k head size, two shared experts, 1 group of 2.
INSTANTIATE_TEST_SUITE_P(Shapes, DeepseekReferenceTest, ::testing::Values("tiny", "tiny-q-proj"));

TEST_P(DeepseekReferenceTest, LogitsMatchTheFloat64Reference) {
  const testing::TinyDeepseek model("reference", 7, GetParam());
  const auto windows = ReferenceWindows();
  const at::Tensor ids = at::stack({at::tensor(windows[0], at::kLong), at::tensor(windows[1], at::kLong)});
  const at::Tensor reference = ReferenceLogits(GetParam());
  ASSERT_GT(reference.abs().max().item<double>(), 0.1);  // not a degenerate model
  // Per window, in float32 (the issue's bound) and in float64 (the same math: only rounding apart).
  auto logits32 = DeepseekLogits(model.config, *model.weights, ids, at::kFloat);
  ASSERT_TRUE(logits32.ok()) << logits32.status();
  auto logits64 = DeepseekLogits(model.config, *model.weights, ids, at::kDouble);
  ASSERT_TRUE(logits64.ok()) << logits64.status();
  for (int64_t w = 0; w < 2; ++w) {
    const double diff = (logits32->select(0, w).to(at::kDouble) - reference.select(0, w)).abs().max().item<double>();
    EXPECT_LT(diff, 1e-4) << w;
    std::cout << GetParam() << " window " << w << ": max |float32 logits - reference| = " << diff << "\n";
  }
  // float64 apart from the RMSNorms, which normalize in float32 as HF's DeepseekV3RMSNorm does.
  EXPECT_LT((*logits64 - reference).abs().max().item<double>(), 1e-6);
  // Each DeepSeek detail moves the float64 logits well beyond that bound, so none of them can be wrong unnoticed
  // (the random weights keep attention near uniform: the softmax scale moves them least, by ~2e-4).
  const auto moved = [&](checkpoint::DeepseekConfig changed) {
    auto logits = DeepseekLogits(changed, *model.weights, ids, at::kDouble);
    EXPECT_TRUE(logits.ok()) << logits.status();
    return (*logits - reference).abs().max().item<double>();
  };
  checkpoint::DeepseekConfig changed = model.config;
  changed.rope_interleave = false;
  EXPECT_GT(moved(changed), 2e-5) << "rope_interleave";
  changed = model.config;
  changed.yarn.reset();
  EXPECT_GT(moved(changed), 2e-5) << "yarn";
  changed = model.config;
  changed.yarn->mscale_all_dim = changed.yarn->mscale + 0.2;
  EXPECT_GT(moved(changed), 2e-5) << "mscale_all_dim";
  changed = model.config;
  changed.routed_scaling_factor = 1.0;
  EXPECT_GT(moved(changed), 2e-5) << "routed_scaling_factor";
  changed = model.config;
  changed.topk_group = changed.n_group;
  EXPECT_GT(moved(changed), 2e-5) << "topk_group";
  changed = model.config;
  changed.norm_topk_prob = false;
  EXPECT_GT(moved(changed), 2e-5) << "norm_topk_prob";
}

TEST_F(DeepseekTest, RoutingKeepsToTheBestGroupsAndScalesTheWeights) {
  auto config = DeepseekSyntheticConfig("tiny", "float32");
  ASSERT_TRUE(config.ok());
  // 16 experts in 4 groups, 2 groups kept, top-4. Token 0 scores experts 12..15 highest but the correction bias lifts
  // groups 0 and 1 (experts 0..7): the choice follows the biased scores, the weights the unbiased ones.
  const at::Tensor router = at::eye(16, at::kFloat) * 4.0;  // hidden = one-hot expert preference
  at::Tensor bias = at::zeros({16});
  bias.narrow(0, 0, 8).fill_(1.0);
  at::Tensor x = at::zeros({1, 16});
  x.narrow(1, 12, 4).fill_(1.0);
  x[0][1] = 0.5;
  x[0][5] = 0.25;
  const MoeBlock::Routing r = DeepseekRouting(*config, bias)(x, router);
  const at::Tensor chosen = std::get<0>(r.selected.sort(-1));
  // Groups 0 and 1 have the best two biased scores summed: experts 1 and 5 lead them, then the others at sigmoid(0).
  for (int64_t i = 0; i < 4; ++i) EXPECT_LT(chosen[0][i].item<int64_t>(), 8) << chosen;
  EXPECT_EQ(r.selected.size(1), 4);
  EXPECT_NEAR(r.weights.sum().item<double>(), config->routed_scaling_factor, 1e-5);  // norm_topk_prob, then x 2.5
  const at::Tensor expected = at::sigmoid(at::tensor({2.0f, 1.0f}));  // experts 1 and 5: unbiased scores
  EXPECT_NEAR(r.scores[0][1].item<double>(), expected[0].item<double>() + 1.0, 1e-6);
}

TEST_F(DeepseekTest, CalibrationCoversEveryExpertAndMisShapedTensorsAreNamed) {
  const testing::TinyDeepseek model("coverage", 3);
  auto layer = DeepseekDecoderLayer::Load(model.config, 1, *model.weights, at::kFloat);
  ASSERT_TRUE(layer.ok()) << layer.status();
  // Named slots in DeepseekLayerLinears' order; the router is not one.
  const auto specs = checkpoint::DeepseekLayerLinears(model.config, 1);
  const auto linears = (*layer)->NamedLinears();
  ASSERT_EQ(linears.size(), specs.size());
  for (size_t i = 0; i < specs.size(); ++i) EXPECT_EQ(linears[i].relative_name, specs[i].relative_name);
  EXPECT_EQ((*layer)->FindLinear("mlp.gate"), nullptr);
  EXPECT_NE((*layer)->FindLinear("mlp.shared_experts.down_proj"), nullptr);
  // 12 tokens x top-4 cannot reach all 16 experts evenly; the top-up gives each at least 5.
  const LayerContext context = DeepseekLayerContext(model.config, 12, at::kFloat);
  at::Tensor hidden = at::randn({1, 12, 64}, at::TensorOptions().dtype(at::kFloat)) ;
  const at::Tensor before = (*layer)->forward(hidden, context);
  (*layer)->BeginCalibration(5);
  const at::Tensor during = (*layer)->forward(hidden, context);
  const auto coverage = (*layer)->FinishCalibration();
  EXPECT_TRUE(at::equal(before, during));
  ASSERT_EQ(coverage.size(), 1u);
  EXPECT_EQ(coverage[0].block, "model.layers.1.mlp");
  ASSERT_EQ(coverage[0].experts.size(), 16u);
  EXPECT_EQ(coverage[0].experts[15], "model.layers.1.mlp.experts.15");
  int64_t routed = 0;
  for (size_t e = 0; e < 16; ++e) {
    EXPECT_GE(coverage[0].routed[e] + coverage[0].topped_up[e], 5) << e;
    routed += coverage[0].routed[e];
  }
  EXPECT_EQ(routed, 12 * 4);
  // The dense layer 0 reports no routed block; the MTP layer is not a decoder layer of the forward.
  auto dense = DeepseekDecoderLayer::Load(model.config, 0, *model.weights, at::kFloat);
  ASSERT_TRUE(dense.ok());
  EXPECT_TRUE((*dense)->FinishCalibration().empty());
  EXPECT_THAT(std::string(DeepseekDecoderLayer::Load(model.config, 3, *model.weights, at::kFloat).status().message()),
              HasSubstr("MTP"));
  // A checkpoint whose tensor disagrees with config.json: the tensor and both shapes are named.
  checkpoint::DeepseekConfig wrong = model.config;
  wrong.kv_lora_rank = 24;
  auto refused = DeepseekDecoderLayer::Load(wrong, 0, *model.weights, at::kFloat);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("tensor \"model.layers.0.self_attn.kv_a_layernorm.weight\" has shape [32] but config.json implies [24]"));
}

}  // namespace
}  // namespace quark::runtime
