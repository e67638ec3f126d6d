// Mixtral, Qwen2-MoE and Qwen3-MoE (#18): config parsing and its refusals, the runtime's logits against an
// independent float64 forward, the expert linears as replaceable slots, and the MoE block's calibration coverage
// (routed counts, the top-up from the best-ranked other tokens, outputs untouched).
#include <algorithm>
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/checkpoint/model_config.h"
#include "core/checkpoint/model_layout.h"
#include "core/checkpoint/moe_layout.h"
#include "core/runtime/full_model.h"
#include "core/runtime/layer_streamer.h"
#include "core/runtime/moe_layer.h"
#include "core/runtime/synthetic_model.h"
#include "tests/runtime/moe_test_models.h"
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

fs::path TempDir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("quark_moe_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

class MoeTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { testing::InitTestEngine(); }
};

TEST(MoeConfigTest, ParsesTheReleasedConfigs) {
  auto mixtral = checkpoint::ParseModelConfig(R"({"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336,
      "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000,
      "num_local_experts": 8, "num_experts_per_tok": 2, "rope_theta": 1e6, "sliding_window": null})");
  ASSERT_TRUE(mixtral.ok()) << mixtral.status();
  EXPECT_EQ(mixtral->family, checkpoint::ArchFamily::kMoe);
  EXPECT_EQ(mixtral->num_experts, 8);
  EXPECT_EQ(mixtral->moe_intermediate_size, 14336);
  EXPECT_TRUE(mixtral->norm_topk_prob);
  EXPECT_EQ(mixtral->sliding_window, 0);
  auto qwen2 = checkpoint::ParseModelConfig(R"({"model_type": "qwen2_moe", "hidden_size": 2048, "intermediate_size": 5632,
      "num_hidden_layers": 24, "num_attention_heads": 16, "vocab_size": 151936, "num_experts": 60,
      "num_experts_per_tok": 4, "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
      "decoder_sparse_step": 1, "mlp_only_layers": [], "norm_topk_prob": false, "use_sliding_window": false})");
  ASSERT_TRUE(qwen2.ok()) << qwen2.status();
  EXPECT_FALSE(qwen2->norm_topk_prob);
  EXPECT_EQ(qwen2->shared_expert_intermediate_size, 5632);
  EXPECT_TRUE(qwen2->attention_bias);
  EXPECT_FALSE(qwen2->o_proj_bias);
  auto qwen3 = checkpoint::ParseModelConfig(R"({"model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144,
      "num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
      "vocab_size": 151936, "num_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 768,
      "norm_topk_prob": true, "decoder_sparse_step": 1, "mlp_only_layers": []})");
  ASSERT_TRUE(qwen3.ok()) << qwen3.status();
  EXPECT_TRUE(qwen3->qk_norm);
  EXPECT_EQ(qwen3->head_dim, 128);
  EXPECT_FALSE(qwen3->attention_bias);
  // 4 attention linears + 128 experts x 3.
  EXPECT_EQ(checkpoint::LayerLinears(*qwen3).size(), 4u + 128 * 3);
  // The round trip through config.json keeps every MoE field.
  for (const auto* c : {&*mixtral, &*qwen2, &*qwen3}) {
    auto again = checkpoint::ParseModelConfig(checkpoint::ModelConfigToJson(*c));
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(again->num_experts, c->num_experts);
    EXPECT_EQ(again->num_experts_per_tok, c->num_experts_per_tok);
    EXPECT_EQ(again->moe_intermediate_size, c->moe_intermediate_size);
    EXPECT_EQ(again->shared_expert_intermediate_size, c->shared_expert_intermediate_size);
    EXPECT_EQ(again->norm_topk_prob, c->norm_topk_prob);
    EXPECT_EQ(again->qk_norm, c->qk_norm);
    EXPECT_EQ(again->attention_bias, c->attention_bias);
  }
}

TEST(MoeConfigTest, RefusesWhatItDoesNotBuildNamingTheField) {
  const std::string base = R"("model_type": "qwen2_moe", "hidden_size": 64, "intermediate_size": 128,
      "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 512, "num_experts": 8, "moe_intermediate_size": 32,
      "shared_expert_intermediate_size": 64)";
  auto sparse_step = checkpoint::ParseModelConfig("{" + base + R"(, "num_experts_per_tok": 2, "decoder_sparse_step": 2})");
  EXPECT_THAT(std::string(sparse_step.status().message()), HasSubstr("decoder_sparse_step"));
  auto dense = checkpoint::ParseModelConfig("{" + base + R"(, "num_experts_per_tok": 2, "mlp_only_layers": [1]})");
  EXPECT_THAT(std::string(dense.status().message()), HasSubstr("mlp_only_layers"));
  auto top_k = checkpoint::ParseModelConfig("{" + base + R"(, "num_experts_per_tok": 9})");
  EXPECT_THAT(std::string(top_k.status().message()), HasSubstr("num_experts_per_tok"));
  auto missing = checkpoint::ParseModelConfig("{" + base + "}");
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("num_experts_per_tok"));
}

TEST_P(MoeTest, LogitsMatchTheFloat64Reference) {
  const fs::path dir = TempDir(GetParam());
  ASSERT_TRUE(testing::WriteMoeModel(testing::TinyMoeConfig(GetParam()), dir.string(), 11).ok());
  auto lm = CausalLm::Open(dir.string());
  ASSERT_TRUE(lm.ok()) << lm.status();
  const auto ids = SomeIds(24, 512);
  const at::Tensor id_tensor = at::tensor(ids, at::kLong).unsqueeze(0);
  auto logits = (*lm)->Forward(id_tensor);
  ASSERT_TRUE(logits.ok()) << logits.status();
  const at::Tensor reference = testing::MoeReferenceLogits(dir.string(), ids);
  const double diff = (logits->squeeze(0).to(at::kDouble) - reference).abs().max().item<double>();
  EXPECT_LT(diff, 1e-4) << GetParam();
  EXPECT_GT(reference.abs().max().item<double>(), 0.1);  // not a degenerate model

  // The layer-streamed forward gives the same logits.
  auto streamer = LayerStreamer::Open(dir.string());
  ASSERT_TRUE(streamer.ok()) << streamer.status();
  auto hidden = (*streamer)->Run({id_tensor});
  ASSERT_TRUE(hidden.ok()) << hidden.status();
  auto streamed = (*streamer)->model().Logits((*hidden)[0]);
  ASSERT_TRUE(streamed.ok());
  EXPECT_LT((*streamed - *logits).abs().max().item<float>(), 1e-5);
  fs::remove_all(dir);
}

TEST_P(MoeTest, ExpertLinearsAreNamedSlotsAndRoutersAreNot) {
  const checkpoint::ModelConfig config = testing::TinyMoeConfig(GetParam());
  const fs::path dir = TempDir(GetParam() + "_names");
  ASSERT_TRUE(testing::WriteMoeModel(config, dir.string(), 3).ok());
  auto lm = CausalLm::Open(dir.string());
  ASSERT_TRUE(lm.ok()) << lm.status();
  const auto& layer = (*lm)->layers()[1];
  const auto linears = layer->NamedLinears();
  const auto specs = checkpoint::LayerLinears(config);
  ASSERT_EQ(linears.size(), specs.size());
  for (size_t i = 0; i < specs.size(); ++i) EXPECT_EQ(linears[i].relative_name, specs[i].relative_name);
  const std::string expert3 = GetParam() == "mixtral" ? "block_sparse_moe.experts.3.w2" : "mlp.experts.3.down_proj";
  EXPECT_NE(layer->FindLinear(expert3), nullptr);
  EXPECT_EQ(layer->FinishCalibration()[0].routed, std::vector<int64_t>(config.num_experts, 0));  // never begun
  EXPECT_EQ(layer->FindLinear(GetParam() == "mixtral" ? "block_sparse_moe.gate" : "mlp.gate"), nullptr);
  // Replacing an expert's linear changes the forward (the slot is the one the block runs).
  const at::Tensor ids = at::tensor(SomeIds(16, 512), at::kLong).unsqueeze(0);
  layer->BeginCalibration(0);
  const at::Tensor before = (*lm)->Forward(ids).value();
  const std::vector<int64_t> routed = layer->FinishCalibration()[0].routed;
  const int64_t busiest = std::max_element(routed.begin(), routed.end()) - routed.begin();
  const std::string down = specs[4 + (config.shared_expert_intermediate_size > 0 ? 3 : 0) + 3 * busiest + 2].relative_name;
  ASSERT_EQ(down, checkpoint::MoeExpertName(config, busiest) + "." + checkpoint::MoeExpertProjections(config).down);
  auto zero = std::make_shared<FloatLinear>(at::zeros_like(layer->FindLinear(down)->weight()), at::Tensor());
  ASSERT_TRUE(layer->ReplaceLinear(down, zero).ok());
  EXPECT_GT(((*lm)->Forward(ids).value() - before).abs().max().item<float>(), 0);
  fs::remove_all(dir);
}

// Expert 3's router row scores it last for every token: it is never routed to, and the top-up runs it on the tokens
// that ranked it highest, leaving the block's output as it was.
TEST_P(MoeTest, CoverageCountsRoutedTokensAndTopsUpAStarvedExpert) {
  const checkpoint::ModelConfig config = testing::TinyMoeConfig(GetParam());
  const fs::path dir = TempDir(GetParam() + "_coverage");
  ASSERT_TRUE(testing::WriteMoeModel(config, dir.string(), 7, testing::StarveExpert(config, 3)).ok());
  auto lm = CausalLm::Open(dir.string());
  ASSERT_TRUE(lm.ok()) << lm.status();
  const at::Tensor ids = at::tensor(SomeIds(40, 512), at::kLong).unsqueeze(0);
  const at::Tensor plain = (*lm)->Forward(ids).value();
  constexpr int64_t kMin = 16;
  for (const auto& layer : (*lm)->layers()) layer->BeginCalibration(kMin);
  const at::Tensor recorded = (*lm)->Forward(ids).value();
  EXPECT_TRUE(at::equal(recorded, plain));
  const int64_t layer_index = 1;
  at::Tensor input, probs;
  testing::MoeReferenceRouting(dir.string(), SomeIds(40, 512), layer_index, &input, &probs);
  // Expert 3 is in no token's top-k in the reference either (else the skew did not work).
  const at::Tensor topk = std::get<1>(probs.topk(config.num_experts_per_tok, -1));
  ASSERT_EQ((topk == 3).sum().item<int64_t>(), 0);
  // Observe what expert 3's first linear sees during the finish.
  auto layer = (*lm)->layers()[layer_index];
  const std::string gate_name = checkpoint::MoeExpertName(config, 3) + "." + checkpoint::MoeExpertProjections(config).gate;
  struct Observer : LinearLike {
    std::shared_ptr<LinearLike> inner;
    std::vector<at::Tensor> seen;
    at::Tensor forward(const at::Tensor& x) override {
      seen.push_back(x.clone());
      return inner->forward(x);
    }
    int64_t in_features() const override { return inner->in_features(); }
    int64_t out_features() const override { return inner->out_features(); }
    at::Tensor weight() const override { return inner->weight(); }
    at::Tensor bias() const override { return inner->bias(); }
  };
  auto observer = std::make_shared<Observer>();
  observer->inner = layer->FindLinear(gate_name);
  ASSERT_TRUE(layer->ReplaceLinear(gate_name, observer).ok());
  const auto coverage = layer->FinishCalibration();
  ASSERT_EQ(coverage.size(), 1u);
  const ExpertCoverage& c = coverage[0];
  EXPECT_EQ(c.block, "model.layers.1." + checkpoint::MoeBlockName(config));
  EXPECT_EQ(c.experts[3], "model.layers.1." + checkpoint::MoeExpertName(config, 3));
  int64_t total = 0;
  for (int64_t e = 0; e < config.num_experts; ++e) {
    total += c.routed[e];
    EXPECT_EQ(c.topped_up[e], std::max<int64_t>(0, std::min<int64_t>(kMin - c.routed[e], 40 - c.routed[e]))) << e;
  }
  EXPECT_EQ(total, 40 * config.num_experts_per_tok);
  EXPECT_EQ(c.routed[3], 0);
  EXPECT_EQ(c.topped_up[3], kMin);
  // It ran on exactly the kMin tokens whose router ranked expert 3 highest (rank, then probability).
  ASSERT_EQ(observer->seen.size(), 1u);
  const at::Tensor best = testing::MoeExpertRanking(probs, 3).narrow(0, 0, kMin);
  const at::Tensor expected = input.index_select(0, std::get<0>(best.sort()));
  const at::Tensor seen = observer->seen[0].to(at::kDouble);
  ASSERT_EQ(seen.size(0), kMin);
  // The same set of token vectors (order aside): sort the rows by their first element.
  const auto by_first = [](const at::Tensor& rows) { return rows.index_select(0, std::get<1>(rows.select(1, 0).sort())); };
  EXPECT_LT((by_first(seen) - by_first(expected)).abs().max().item<double>(), 1e-4);
  // Finished: a later forward records nothing and a second finish finds no tokens.
  (*lm)->Forward(ids).value();
  EXPECT_EQ(layer->FinishCalibration()[0].routed[0], 0);
  fs::remove_all(dir);
}

TEST_P(MoeTest, MakeModelShapesLoadAndRun) {
  const fs::path dir = TempDir(GetParam() + "_synthetic");
  SyntheticModelOptions options;
  options.arch = GetParam();
  options.shape = "tiny";
  options.dtype = "bf16";
  options.out_dir = dir.string();
  ASSERT_TRUE(MakeSyntheticModel(options).ok());
  auto lm = CausalLm::Open(dir.string(), at::kBFloat16);
  ASSERT_TRUE(lm.ok()) << lm.status();
  auto logits = (*lm)->Forward(at::tensor(SomeIds(12, 512), at::kLong).unsqueeze(0));
  ASSERT_TRUE(logits.ok()) << logits.status();
  EXPECT_TRUE(logits->isfinite().all().item<bool>());
  fs::remove_all(dir);
  // The real shapes are known and valid configs.
  const std::string real = GetParam() == "mixtral" ? "mixtral-8x7b" : GetParam() == "qwen2_moe" ? "qwen1.5-moe-a2.7b" : "qwen3-30b-a3b";
  auto config = SyntheticConfig(GetParam(), real, "bf16");
  ASSERT_TRUE(config.ok()) << config.status();
  auto parsed = checkpoint::ParseModelConfig(checkpoint::ModelConfigToJson(*config));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->num_experts, GetParam() == "mixtral" ? 8 : GetParam() == "qwen2_moe" ? 60 : 128);
}

INSTANTIATE_TEST_SUITE_P(Archs, MoeTest, ::testing::Values("mixtral", "qwen2_moe", "qwen3_moe"));

}  // namespace
}  // namespace quark::runtime
