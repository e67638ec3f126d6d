// checkpoint::TokenPassElements in closed form: the per-token term of the device budget and the estimator.
#include "core/checkpoint/token_pass_memory.h"

#include <string>

#include <gtest/gtest.h>

#include "core/checkpoint/model_config.h"
#include "core/checkpoint/model_layout.h"

namespace quark::checkpoint {
namespace {

// Mixtral-shaped: hidden 64, intermediate 96 for every expert, 8 experts, top-2.
ModelConfig TinyMixtral() {
  auto config = ParseModelConfig(R"({"model_type": "mixtral", "hidden_size": 64, "intermediate_size": 96,
      "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512,
      "max_position_embeddings": 512, "rms_norm_eps": 1e-5, "num_local_experts": 8, "num_experts_per_tok": 2})");
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *config : ModelConfig{};
}

const auto kEverything = [](const LinearSpec&) { return true; };

// GPTQ of experts in groups of G keeps the routed block's input (hidden a token) and one group's calls: a token
// reaches at most min(G, top_k) of the group's experts, each call the experts' input width (hidden).
TEST(TokenPassElementsTest, GptqOfExpertsInGroupsKeepsTheBlockInputAndAGroupsCalls) {
  const ModelConfig config = TinyMixtral();
  const std::vector<LinearSpec> linears = LayerLinears(config, 0);
  TokenPasses passes;
  EXPECT_EQ(TokenPassElements(linears, kEverything, config, passes), 0);
  passes.gptq_expert_group = 1;
  EXPECT_EQ(TokenPassElements(linears, kEverything, config, passes), 64 + 1 * 64);
  passes.gptq_expert_group = 2;
  EXPECT_EQ(TokenPassElements(linears, kEverything, config, passes), 64 + 2 * 64);
  passes.gptq_expert_group = 8;  // a token reaches top_k = 2 experts of any group
  EXPECT_EQ(TokenPassElements(linears, kEverything, config, passes), 64 + 2 * 64);
  // Routed experts left unquantized: nothing is recorded for them.
  const auto attention_only = [](const LinearSpec& l) { return !l.routed; };
  EXPECT_EQ(TokenPassElements(linears, attention_only, config, passes), 0);
  // With a float stream (GPTAQ's, which runs refuse with experts in groups) the two terms add.
  passes.float_stream = true;
  EXPECT_EQ(TokenPassElements(linears, kEverything, config, passes), 2 * 64 + 64 + 2 * 64);
}

}  // namespace
}  // namespace quark::checkpoint
