// config.json's sliding_window (Mistral; Qwen2 with use_sliding_window and its per-layer choice).
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/checkpoint/model_config.h"

namespace quark::checkpoint {
namespace {

using ::testing::HasSubstr;

// A 3-layer config of `model_type` with `extra` fields appended (", \"key\": value, ...").
std::string Config(const std::string& model_type, const std::string& extra) {
  return R"({"model_type": ")" + model_type + R"(", "hidden_size": 64, "intermediate_size": 8,
      "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 10)" + extra + "}";
}

TEST(SlidingWindowConfigTest, MistralWindowAppliesToEveryLayer) {
  auto config = ParseModelConfig(Config("mistral", R"(, "sliding_window": 4096)"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->sliding_window, 4096);
  for (int64_t layer = 0; layer < 3; ++layer) EXPECT_EQ(LayerAttentionWindow(*config, layer), 4096);
}

TEST(SlidingWindowConfigTest, NullOrAbsentMeansNoWindow) {
  for (const std::string& extra : {std::string(R"(, "sliding_window": null)"), std::string()}) {
    auto config = ParseModelConfig(Config("mistral", extra));
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_EQ(config->sliding_window, 0) << extra;
    EXPECT_EQ(LayerAttentionWindow(*config, 0), 0);
  }
}

TEST(SlidingWindowConfigTest, NonPositiveOrNonIntegerWindowIsNamed) {
  for (const std::string value : {"0", "-3"}) {
    auto config = ParseModelConfig(Config("mistral", R"(, "sliding_window": )" + value));
    ASSERT_FALSE(config.ok()) << value;
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(config.status().message()), HasSubstr("\"sliding_window\""));
    EXPECT_THAT(std::string(config.status().message()), HasSubstr(value));
  }
  auto text = ParseModelConfig(Config("mistral", R"(, "sliding_window": "4096")"));
  ASSERT_FALSE(text.ok());
  EXPECT_THAT(std::string(text.status().message()), HasSubstr("\"sliding_window\""));
}

TEST(SlidingWindowConfigTest, LlamaHasNoWindow) {
  auto config = ParseModelConfig(Config("llama", R"(, "sliding_window": 16)"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->sliding_window, 0);
}

TEST(SlidingWindowConfigTest, Qwen2UsesTheWindowOnlyWhenAskedAndOnlyFromMaxWindowLayers) {
  // HF's Qwen2 configs carry a window with use_sliding_window false: it is then ignored, even a bad one.
  auto off = ParseModelConfig(Config("qwen2", R"(, "use_sliding_window": false, "sliding_window": 0)"));
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ(off->sliding_window, 0);
  auto on = ParseModelConfig(Config("qwen2", R"(, "use_sliding_window": true, "sliding_window": 8, "max_window_layers": 1)"));
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_EQ(on->sliding_window, 8);
  EXPECT_EQ(LayerAttentionWindow(*on, 0), 0);
  EXPECT_EQ(LayerAttentionWindow(*on, 1), 8);
  EXPECT_EQ(LayerAttentionWindow(*on, 2), 8);
  // HF's default max_window_layers (28) leaves every layer of a 3-layer model unwindowed.
  auto default_layers = ParseModelConfig(Config("qwen2", R"(, "use_sliding_window": true, "sliding_window": 8)"));
  ASSERT_TRUE(default_layers.ok());
  EXPECT_EQ(LayerAttentionWindow(*default_layers, 2), 0);
  auto bad = ParseModelConfig(Config("qwen2", R"(, "use_sliding_window": true, "sliding_window": -1)"));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("\"sliding_window\""));
}

TEST(SlidingWindowConfigTest, Qwen2LayerTypesWinOverMaxWindowLayers) {
  auto config = ParseModelConfig(Config("qwen2", R"(, "use_sliding_window": true, "sliding_window": 8,
      "max_window_layers": 0, "layer_types": ["sliding_attention", "full_attention", "sliding_attention"])"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(LayerAttentionWindow(*config, 0), 8);
  EXPECT_EQ(LayerAttentionWindow(*config, 1), 0);
  EXPECT_EQ(LayerAttentionWindow(*config, 2), 8);
  auto short_list = ParseModelConfig(Config("qwen2", R"(, "use_sliding_window": true, "sliding_window": 8,
      "layer_types": ["sliding_attention"])"));
  EXPECT_THAT(std::string(short_list.status().message()), HasSubstr("\"layer_types\""));
  auto unknown = ParseModelConfig(Config("qwen2", R"(, "use_sliding_window": true, "sliding_window": 8,
      "layer_types": ["sliding_attention", "chunked_attention", "full_attention"])"));
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("layer_types[1]"));
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("chunked_attention"));
}

TEST(SlidingWindowConfigTest, WrittenConfigReadsBackTheSameWindows) {
  for (const std::string& text :
       {Config("mistral", R"(, "sliding_window": 16)"), Config("mistral", R"(, "sliding_window": null)"),
        Config("qwen2", R"(, "use_sliding_window": true, "sliding_window": 8, "max_window_layers": 2)"),
        Config("qwen2", R"(, "use_sliding_window": false)")}) {
    auto config = ParseModelConfig(text);
    ASSERT_TRUE(config.ok()) << config.status();
    auto again = ParseModelConfig(ModelConfigToJson(*config));
    ASSERT_TRUE(again.ok()) << again.status() << "\n" << ModelConfigToJson(*config);
    EXPECT_EQ(again->sliding_window, config->sliding_window) << text;
    for (int64_t layer = 0; layer < 3; ++layer) {
      EXPECT_EQ(LayerAttentionWindow(*again, layer), LayerAttentionWindow(*config, layer)) << text;
    }
  }
}

}  // namespace
}  // namespace quark::checkpoint
