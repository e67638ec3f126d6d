// config.json parsing and the torch-free module list.
#include <cstdlib>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/checkpoint/model_config.h"
#include "core/checkpoint/model_layout.h"
#include "core/checkpoint/model_modules.h"

namespace quark::checkpoint {
namespace {

using ::testing::HasSubstr;

std::string SharedDir() {
  const char* dir = std::getenv("QUARK_SHARED_DIR");
  return dir ? dir : "/work/shared";
}

TEST(ModelConfigTest, ReadsStories260K) {
  auto config = LoadModelConfig(SharedDir() + "/fixtures/stories260K");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->family, ArchFamily::kLlama);
  EXPECT_EQ(config->hidden_size, 64);
  EXPECT_EQ(config->num_key_value_heads, 4);
  EXPECT_EQ(config->head_dim, 8);
  EXPECT_TRUE(config->tie_word_embeddings);
  EXPECT_EQ(config->bos_token_id, 1);
  EXPECT_DOUBLE_EQ(config->rms_norm_eps, 1e-5);
}

TEST(ModelConfigTest, RefusesAnUnknownModelTypeListingTheSupportedOnes) {
  auto config = ParseModelConfig(R"({"model_type": "gpt2", "hidden_size": 8})");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(std::string(config.status().message()), HasSubstr("\"gpt2\""));
  EXPECT_THAT(std::string(config.status().message()), HasSubstr("llama, mistral, qwen2, qwen3, phi3"));
}

TEST(ModelConfigTest, NamesTheBadField) {
  auto config = ParseModelConfig(R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 8,
      "num_hidden_layers": 1, "num_attention_heads": 6, "vocab_size": 10})");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(std::string(config.status().message()), HasSubstr("hidden_size"));
  auto missing = ParseModelConfig(R"({"model_type": "llama"})");
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("\"hidden_size\" is missing"));
  EXPECT_FALSE(ParseModelConfig("not json").ok());
}

TEST(ModelConfigTest, Llama3RopeScalingAndEosList) {
  auto config = ParseModelConfig(R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 8,
      "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 10,
      "rope_theta": 500000.0, "eos_token_id": [128001, 128009],
      "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                       "original_max_position_embeddings": 8192}})");
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_TRUE(config->rope_scaling.has_value());
  EXPECT_DOUBLE_EQ(config->rope_scaling->factor, 8.0);
  EXPECT_EQ(config->eos_token_id, 128001);
  auto round_trip = ParseModelConfig(ModelConfigToJson(*config));
  ASSERT_TRUE(round_trip.ok()) << round_trip.status();
  EXPECT_EQ(round_trip->rope_scaling->original_max_position_embeddings, 8192);
  auto bad = ParseModelConfig(R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 8,
      "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 10, "rope_scaling": {"rope_type": "yarn"}})");
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("yarn"));
}

TEST(ModelConfigTest, Qwen2HasQkvBiasOnly) {
  auto config = ParseModelConfig(R"({"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 8,
      "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 10})");
  ASSERT_TRUE(config.ok());
  auto linears = LayerLinears(*config);
  EXPECT_TRUE(linears[0].has_bias);
  EXPECT_TRUE(linears[2].has_bias);
  EXPECT_FALSE(linears[3].has_bias);
  EXPECT_EQ(linears[1].out_features, 32);
}

TEST(ModelConfigTest, OptNamesAndShapes) {
  auto config = ParseModelConfig(R"({"model_type": "opt", "hidden_size": 32, "ffn_dim": 64, "num_hidden_layers": 2,
      "num_attention_heads": 4, "vocab_size": 50, "max_position_embeddings": 16, "word_embed_proj_dim": 32})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->tie_word_embeddings);
  auto tensors = ModelTensors(*config);
  EXPECT_EQ(tensors[1].name, "model.decoder.embed_positions.weight");
  EXPECT_EQ(tensors[1].shape, (std::vector<int64_t>{18, 32}));
  EXPECT_EQ(tensors[2].name, "model.decoder.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(tensors.back().name, "model.decoder.final_layer_norm.bias");
}

TEST(ModelModulesTest, ListsStories260K) {
  auto modules = ListModelModules(SharedDir() + "/fixtures/stories260K");
  ASSERT_TRUE(modules.ok()) << modules.status();
  ASSERT_EQ(modules->size(), 1u + 5 * 7 + 1);
  EXPECT_EQ((*modules)[0].name, "model.embed_tokens");
  EXPECT_EQ((*modules)[0].type, "Embedding");
  EXPECT_EQ((*modules)[2].name, "model.layers.0.self_attn.k_proj");
  EXPECT_EQ((*modules)[2].weight_shape, (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(modules->back().name, "lm_head");
  EXPECT_EQ(modules->back().weight_shape, (std::vector<int64_t>{512, 64}));
}

TEST(ModelModulesTest, MissingFolderIsAnError) {
  EXPECT_FALSE(ListModelModules("/nonexistent/model").ok());
}

}  // namespace
}  // namespace quark::checkpoint
