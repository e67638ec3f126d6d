// The acceptance numbers of the runtime: stories260K on the TinyStories validation prefix, against values
// computed by an independent fp64 reference.
#include <gtest/gtest.h>

#include "core/engine/engine_init.h"
#include "core/runtime/layer_streamer.h"
#include "core/runtime/perplexity.h"
#include "core/runtime/tokenizer.h"
#include "tests/runtime/test_paths.h"

namespace quark::runtime {
namespace {

using testing::Stories260K;
using testing::TinyStoriesText;

class Stories260KTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::InitTestEngine();
    auto streamer = LayerStreamer::Open(Stories260K());
    ASSERT_TRUE(streamer.ok()) << streamer.status();
    streamer_ = *std::move(streamer);
    auto tokenizer = Tokenizer::Open(Stories260K(), streamer_->config().bos_token_id, streamer_->config().eos_token_id);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = *std::move(tokenizer);
    auto text = ReadTextFile(TinyStoriesText());
    ASSERT_TRUE(text.ok()) << text.status();
    text_ = *text;
  }
  std::unique_ptr<LayerStreamer> streamer_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::string text_;
};

TEST_F(Stories260KTest, FortyWindowsOf512MatchTheReference) {
  auto ids = tokenizer_->EncodeWithBos(text_);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ((*ids)[0], 1);
  PerplexityOptions options;
  options.seq_len = 512;
  options.max_windows = 40;
  auto result = EvaluatePerplexity(*streamer_, *ids, options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->windows, 40);
  EXPECT_EQ(result->seq_len, 512);
  EXPECT_NEAR(result->mean_nll, 1.40307, 0.001);
  EXPECT_NEAR(result->ppl, 4.0677, 0.005);
}

TEST_F(Stories260KTest, StoryZeroIs171TokensWithTheReferenceNll) {
  // Story #0: its first two paragraphs joined by a blank line.
  const size_t first = text_.find("\n\n");
  const size_t second = text_.find("\n\n", first + 2);
  const std::string story = text_.substr(0, second);
  auto ids = tokenizer_->EncodeWithBos(story);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->size(), 171u);
  auto result = EvaluatePerplexity(*streamer_, *ids);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->windows, 1);
  EXPECT_EQ(result->seq_len, 512);  // min(2048, max_position_embeddings)
  EXPECT_NEAR(result->mean_nll, 1.2977, 0.001);
}

TEST_F(Stories260KTest, WindowsPastTheTrainedContextAreAnError) {
  auto ids = tokenizer_->EncodeWithBos(text_);
  ASSERT_TRUE(ids.ok());
  PerplexityOptions options;
  options.seq_len = 513;  // max_position_embeddings is 512
  options.max_windows = 1;
  auto result = EvaluatePerplexity(*streamer_, *ids, options);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(result.status().message()).find("seq_len: 513 is above the model's max_position_embeddings (512)"),
            std::string::npos)
      << result.status();
}

TEST(PerplexityWindowsTest, NonOverlappingWithAShortTailAndACap) {
  using Windows = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(PerplexityWindows(10, 4, 0), (Windows{{0, 4}, {4, 4}, {8, 2}}));
  EXPECT_EQ(PerplexityWindows(9, 4, 0), (Windows{{0, 4}, {4, 4}}));  // a 1-token tail predicts nothing
  EXPECT_EQ(PerplexityWindows(10, 4, 2), (Windows{{0, 4}, {4, 4}}));
  EXPECT_EQ(PerplexityWindows(1, 4, 0), Windows{});
}

TEST_F(Stories260KTest, RefusesBadInput) {
  EXPECT_FALSE(EvaluatePerplexity(*streamer_, {1}).ok());
  PerplexityOptions options;
  options.seq_len = -1;
  EXPECT_FALSE(EvaluatePerplexity(*streamer_, {1, 2, 3}, options).ok());
  auto bad_id = EvaluatePerplexity(*streamer_, {1, 5000, 3});
  ASSERT_FALSE(bad_id.ok());
  EXPECT_NE(std::string(bad_id.status().message()).find("5000"), std::string::npos) << bad_id.status();
}

}  // namespace
}  // namespace quark::runtime
