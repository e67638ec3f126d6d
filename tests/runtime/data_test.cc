// Tokenizer, token-id files and calibration sets.
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/runtime/calibration_data.h"
#include "core/runtime/tokenizer.h"
#include "tests/runtime/test_paths.h"

namespace quark::runtime {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

fs::path WriteFile(const std::string& name, const std::string& text) {
  const fs::path path = fs::temp_directory_path() / ("quark_data_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(TokenizerTest, EncodesWithBosAndDecodes) {
  auto tokenizer = Tokenizer::Open(testing::Stories260K(), 1, 2);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->vocab_size(), 512);
  auto ids = (*tokenizer)->EncodeWithBos("Once upon a time, there was a cat.");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ((*ids)[0], 1);
  EXPECT_GT(ids->size(), 5u);
  std::vector<int64_t> pieces(ids->begin() + 1, ids->end());
  EXPECT_EQ((*tokenizer)->Decode(pieces), "Once upon a time, there was a cat.");
}

TEST(TokenizerTest, NamesAMissingOrBadModel) {
  EXPECT_EQ(Tokenizer::Open("/nonexistent").status().code(), absl::StatusCode::kNotFound);
  const fs::path junk = WriteFile("junk.model", "not a model");
  auto bad = Tokenizer::Open(junk.string());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("not a SentencePiece model"));
  fs::remove(junk);
}

TEST(TokenIdFileTest, ReadsLinesAndRefusesJunk) {
  const fs::path good = WriteFile("good.ids", "1 5 7,9\n\n3 4\n");
  auto ids = ReadTokenIdFile(good.string());
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::vector<std::vector<int64_t>>{{1, 5, 7, 9}, {3, 4}}));
  const fs::path bad = WriteFile("bad.ids", "1 2\n3 x4\n");
  EXPECT_THAT(std::string(ReadTokenIdFile(bad.string()).status().message()), HasSubstr(":2: \"x4\""));
  fs::remove(good);
  fs::remove(bad);
}

TEST(CalibrationTest, DeterministicBySeedFromTextJsonlAndIds) {
  auto tokenizer = Tokenizer::Open(testing::Stories260K(), 1, 2);
  ASSERT_TRUE(tokenizer.ok());
  // The first 20 kB of the eval text (the whole file takes seconds to tokenize).
  auto text = ReadTextFile(testing::TinyStoriesText());
  ASSERT_TRUE(text.ok());
  const fs::path prefix = WriteFile("prefix.txt", text->substr(0, 20000));
  CalibrationOptions options;
  options.path = prefix.string();
  options.num_samples = 4;
  options.seq_len = 64;
  options.seed = 3;
  auto a = LoadCalibrationSet(options, tokenizer->get());
  auto b = LoadCalibrationSet(options, tokenizer->get());
  ASSERT_TRUE(a.ok() && b.ok()) << a.status();
  ASSERT_EQ(a->samples.size(), 4u);
  EXPECT_EQ(a->samples[0].sizes(), (std::vector<int64_t>{1, 64}));
  for (size_t i = 0; i < 4; ++i) EXPECT_TRUE(at::equal(a->samples[i], b->samples[i]));
  options.seed = 4;
  auto c = LoadCalibrationSet(options, tokenizer->get());
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(at::equal(a->samples[0], c->samples[0]));

  const fs::path jsonl = WriteFile("cal.jsonl", "{\"text\": \"Once upon a time there was a dog.\"}\n{\"text\": \"The end.\"}\n");
  options.path = jsonl.string();
  options.seq_len = 8;
  auto j = LoadCalibrationSet(options, tokenizer->get());
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(j->samples.size(), 4u);
  const fs::path ids = WriteFile("cal.ids", "1 2 3 4 5 6 7 8 9 10\n");
  options.path = ids.string();
  auto k = LoadCalibrationSet(options, nullptr);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->total_tokens, 10);
  fs::remove(jsonl);
  fs::remove(ids);
  fs::remove(prefix);
}

TEST(CalibrationTest, ErrorsNameTheProblem) {
  auto tokenizer = Tokenizer::Open(testing::Stories260K(), 1, 2);
  ASSERT_TRUE(tokenizer.ok());
  const fs::path bad = WriteFile("bad.jsonl", "{\"text\": \"ok\"}\n{\"body\": 1}\n");
  CalibrationOptions options;
  options.path = bad.string();
  options.seq_len = 2;
  EXPECT_THAT(std::string(LoadCalibrationSet(options, tokenizer->get()).status().message()), HasSubstr(":2:"));
  const fs::path small = WriteFile("small.ids", "1 2 3\n");
  options.path = small.string();
  options.seq_len = 10;
  EXPECT_THAT(std::string(LoadCalibrationSet(options, nullptr).status().message()), HasSubstr("fewer than seq_len"));
  options.num_samples = 0;
  EXPECT_FALSE(LoadCalibrationSet(options, nullptr).ok());
  fs::remove(bad);
  fs::remove(small);
}

}  // namespace
}  // namespace quark::runtime
