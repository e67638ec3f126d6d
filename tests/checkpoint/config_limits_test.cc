// config.json sizes a caller controls are bounded before anything is sized by them (config_limits.h): a config
// claiming 2^31 layers or experts is refused at once with the field named, never allocated for.
#include "core/checkpoint/config_limits.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/checkpoint/deepseek_config.h"
#include "core/checkpoint/llama4_config.h"
#include "core/checkpoint/model_config.h"
#include "core/checkpoint/model_modules.h"

namespace quark::checkpoint {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

std::string FixturesRoot() {
  const char* dir = std::getenv("QUARK_SHARED_DIR");
  return dir ? dir : "/work/shared";
}

json Stories() {
  std::ifstream in(FixturesRoot() + "/fixtures/stories260K/config.json");
  return json::parse(in);
}

json Mixtral() {
  json c = Stories();
  c["model_type"] = "mixtral";
  c["num_local_experts"] = 4;
  c["num_experts_per_tok"] = 2;
  return c;
}

std::string Message(const absl::StatusOr<ModelConfig>& config) { return std::string(config.status().message()); }

// Each size field, one at a time, at 2^31 - 1: refused INVALID_ARGUMENT naming that field and its value.
TEST(ConfigLimitsTest, EverySizeFieldAboveItsLimitIsRefusedNamingTheField) {
  for (const char* field : {"num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads",
                            "num_key_value_heads", "head_dim", "vocab_size", "max_position_embeddings"}) {
    json c = Stories();
    c[field] = 2147483647;
    absl::StatusOr<ModelConfig> config = ParseModelConfig(c.dump(), "config.json");
    ASSERT_FALSE(config.ok()) << field;
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_THAT(Message(config), HasSubstr(std::string("field \"") + field + "\" = 2147483647 is above the limit"));
  }
  json opt = Stories();
  opt["model_type"] = "opt";
  opt["ffn_dim"] = 172;
  opt["word_embed_proj_dim"] = int64_t{1} << 40;
  EXPECT_THAT(Message(ParseModelConfig(opt.dump(), "config.json")), HasSubstr("\"word_embed_proj_dim\""));
  opt["word_embed_proj_dim"] = -1;
  EXPECT_THAT(Message(ParseModelConfig(opt.dump(), "config.json")), HasSubstr("must be positive"));
}

TEST(ConfigLimitsTest, ExpertsAreBoundedAloneAndTimesTheLayers) {
  json c = Mixtral();
  ASSERT_TRUE(ParseModelConfig(c.dump(), "config.json").ok());
  c["num_local_experts"] = 2147483647;
  EXPECT_THAT(Message(ParseModelConfig(c.dump(), "config.json")),
              HasSubstr("field \"num_local_experts\" = 2147483647 is above the limit 4096"));
  c["num_local_experts"] = 4096;
  c["num_hidden_layers"] = 4096;  // each within its limit; 16 Mi experts in all is not
  EXPECT_THAT(Message(ParseModelConfig(c.dump(), "config.json")),
              HasSubstr("field \"num_local_experts\" = 4096 in each of 4096 layers is above the limit"));
}

TEST(ConfigLimitsTest, LimitsLeaveRoomForReleasedModels) {
  json c = Stories();
  c["num_hidden_layers"] = 126;           // Llama-3.1-405B
  c["hidden_size"] = 16384;
  c["intermediate_size"] = 53248;
  c["num_attention_heads"] = 128;
  c["num_key_value_heads"] = 8;
  c["vocab_size"] = 262144;               // Gemma 3
  c["max_position_embeddings"] = 10485760;  // Llama 4 Scout
  EXPECT_TRUE(ParseModelConfig(c.dump(), "config.json").ok());
}

class ModelFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/config-limits-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    std::filesystem::copy_file(FixturesRoot() + "/fixtures/stories260K/model.safetensors", dir_ + "/model.safetensors");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void WriteConfig(const std::string& text) { std::ofstream(dir_ + "/config.json") << text; }

  std::string dir_;
};

// Within the limits, but more layers (or layer x experts) than the checkpoint's tensors can hold: refused before
// the module list is sized by them.
TEST_F(ModelFolderTest, LayersAndExpertsAreBoundedByTheTensorsHeld) {
  json c = Stories();
  c["num_hidden_layers"] = 4000;
  WriteConfig(c.dump());
  absl::StatusOr<std::vector<ModuleInfo>> modules = ListModelModules(dir_);
  ASSERT_FALSE(modules.ok());
  EXPECT_EQ(modules.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(modules.status().message()),
              HasSubstr("field \"num_hidden_layers\" = 4000 is more layers than the"));
  json m = Mixtral();
  m["num_local_experts"] = 4000;
  m["num_experts_per_tok"] = 2;
  WriteConfig(m.dump());
  modules = ListModelModules(dir_);
  ASSERT_FALSE(modules.ok());
  EXPECT_THAT(std::string(modules.status().message()),
              HasSubstr("field \"num_local_experts\" = 4000 in each of 5 MoE layers is more experts than the"));
}

// Only the MoE layers hold experts: DeepSeek-V3's deepseek-v3-4l cut (3 dense layers, then one of 256 experts) holds
// 821 tensors, which 4 x 256 experts would exceed; Llama 4 counts its interleaved MoE layers alone.
TEST(TensorCountBoundTest, OnlyTheMoeLayersAreCountedForExperts) {
  ModelConfig deepseek;
  deepseek.model_type = "deepseek_v3";
  deepseek.family = ArchFamily::kDeepseek;
  deepseek.num_hidden_layers = 4;
  deepseek.num_experts = 256;
  auto parsed = std::make_shared<DeepseekConfig>();
  parsed->first_k_dense_replace = 3;
  deepseek.deepseek = parsed;
  EXPECT_TRUE(CheckTensorCountBound(deepseek, 821, "cut").ok());
  absl::Status refused = CheckTensorCountBound(deepseek, 255, "cut");
  EXPECT_THAT(std::string(refused.message()), HasSubstr("= 256 in each of 1 MoE layers is more experts than the 255"));

  ModelConfig llama4;
  llama4.model_type = "llama4_text";
  llama4.family = ArchFamily::kLlama4;
  llama4.num_hidden_layers = 4;
  llama4.num_experts = 16;
  auto interleaved = std::make_shared<Llama4Config>();
  interleaved->moe_layers = {false, true, false, true};
  llama4.llama4 = interleaved;
  EXPECT_TRUE(CheckTensorCountBound(llama4, 40, "cut").ok());
  EXPECT_THAT(std::string(CheckTensorCountBound(llama4, 31, "cut").message()), HasSubstr("in each of 2 MoE layers"));
}

TEST_F(ModelFolderTest, AConfigJsonAboveFourMebibytesIsNotRead) {
  json c = Stories();
  c["padding"] = std::string(kMaxConfigJsonBytes, ' ');
  WriteConfig(c.dump());
  absl::StatusOr<ModelConfig> config = LoadModelConfig(dir_);
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(Message(config), HasSubstr("more than 4194304 bytes"));
  WriteConfig(Stories().dump());
  EXPECT_TRUE(LoadModelConfig(dir_).ok());
}

}  // namespace
}  // namespace quark::checkpoint
