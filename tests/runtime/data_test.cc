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

// Plain text: random windows of seq_len tokens, the same for the same seed.
TEST(CalibrationTest, TextWindowsAreDeterministicBySeed) {
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
  fs::remove(prefix);
}

std::vector<int64_t> Ids(const at::Tensor& sample) {
  EXPECT_EQ(sample.dim(), 2);
  EXPECT_EQ(sample.size(0), 1);
  EXPECT_EQ(sample.scalar_type(), at::kLong);
  const at::Tensor flat = sample.contiguous().view(-1);
  return std::vector<int64_t>(flat.data_ptr<int64_t>(), flat.data_ptr<int64_t>() + flat.numel());
}

// A token-id file: sample k is line k as it is (blank lines skipped), in file order, cut to seq_len, never padded;
// the seed plays no part.
TEST(CalibrationTest, TokenIdLinesAreTheSamplesInOrder) {
  const fs::path ids = WriteFile("order.ids", "9 8 7\n\n1 2 3 4 5 6 7 8 9 10\n4\n6, 5\n");
  CalibrationOptions options;
  options.path = ids.string();
  options.num_samples = 3;
  options.seq_len = 4;
  auto set = LoadCalibrationSet(options, nullptr);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->samples.size(), 3u);
  EXPECT_EQ(Ids(set->samples[0]), (std::vector<int64_t>{9, 8, 7}));     // shorter than seq_len: as it is
  EXPECT_EQ(Ids(set->samples[1]), (std::vector<int64_t>{1, 2, 3, 4}));  // truncated
  EXPECT_EQ(Ids(set->samples[2]), (std::vector<int64_t>{4}));
  EXPECT_EQ(set->total_tokens, 3 + 10 + 1);
  options.seed = 99;
  auto again = LoadCalibrationSet(options, nullptr);
  ASSERT_TRUE(again.ok());
  for (size_t k = 0; k < 3; ++k) EXPECT_TRUE(at::equal(again->samples[k], set->samples[k]));
  // Fewer lines than asked for: all of them.
  options.num_samples = 100;
  options.seq_len = 512;
  auto all = LoadCalibrationSet(options, nullptr);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->samples.size(), 4u);
  EXPECT_EQ(Ids(all->samples[1]), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  EXPECT_EQ(Ids(all->samples[3]), (std::vector<int64_t>{6, 5}));
  // An explicit format wins over the extension.
  const fs::path renamed = WriteFile("order.txt", "9 8 7\n1 2\n");
  options.path = renamed.string();
  options.format = CalibrationFormat::kTokenIds;
  auto explicit_ids = LoadCalibrationSet(options, nullptr);
  ASSERT_TRUE(explicit_ids.ok()) << explicit_ids.status();
  ASSERT_EQ(explicit_ids->samples.size(), 2u);
  EXPECT_EQ(Ids(explicit_ids->samples[1]), (std::vector<int64_t>{1, 2}));
  fs::remove(ids);
  fs::remove(renamed);
}

// A JSONL file: sample k is [BOS] + encode(text) of line k, in file order, cut to seq_len.
TEST(CalibrationTest, JsonlLinesAreTheSamplesInOrder) {
  auto tokenizer = Tokenizer::Open(testing::Stories260K(), 1, 2);
  ASSERT_TRUE(tokenizer.ok());
  const std::vector<std::string> texts = {"Once upon a time there was a dog.", "The end.",
                                          "A little girl named Lily found a big red ball in the park."};
  const fs::path jsonl = WriteFile("order.jsonl", "{\"text\": \"" + texts[0] + "\"}\n\n  \n{\"text\": \"" + texts[1] +
                                                      "\", \"id\": 7}\n{\"text\": \"" + texts[2] + "\"}\n");
  std::vector<std::vector<int64_t>> want;
  for (const std::string& text : texts) want.push_back(*(*tokenizer)->EncodeWithBos(text));
  ASSERT_GT(want[2].size(), 8u);
  CalibrationOptions options;
  options.path = jsonl.string();
  options.num_samples = 3;
  options.seq_len = 512;
  auto whole = LoadCalibrationSet(options, tokenizer->get());
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_EQ(whole->samples.size(), 3u);
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ(Ids(whole->samples[k]), want[k]) << "line " << k;
  EXPECT_EQ(whole->total_tokens, static_cast<int64_t>(want[0].size() + want[1].size() + want[2].size()));
  // Truncated to seq_len; a shorter line stays as it is.
  options.seq_len = 8;
  options.num_samples = 2;
  auto cut = LoadCalibrationSet(options, tokenizer->get());
  ASSERT_TRUE(cut.ok()) << cut.status();
  ASSERT_EQ(cut->samples.size(), 2u);
  EXPECT_EQ(Ids(cut->samples[0]), std::vector<int64_t>(want[0].begin(), want[0].begin() + 8));
  EXPECT_EQ(Ids(cut->samples[1]), want[1]);
  EXPECT_LT(want[1].size(), 8u);
  // Fewer lines than asked for: all of them.
  options.num_samples = 128;
  auto all = LoadCalibrationSet(options, tokenizer->get());
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->samples.size(), 3u);
  fs::remove(jsonl);
}

TEST(CalibrationTest, ErrorsNameTheProblem) {
  auto tokenizer = Tokenizer::Open(testing::Stories260K(), 1, 2);
  ASSERT_TRUE(tokenizer.ok());
  const fs::path bad = WriteFile("bad.jsonl", "{\"text\": \"ok\"}\n\n{\"body\": 1}\n");
  CalibrationOptions options;
  options.path = bad.string();
  options.seq_len = 2;
  absl::Status status = LoadCalibrationSet(options, tokenizer->get()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr(bad.string() + ":3:"));
  // A bad line after the ones used is an error too.
  options.num_samples = 1;
  EXPECT_THAT(std::string(LoadCalibrationSet(options, tokenizer->get()).status().message()),
              HasSubstr(bad.string() + ":3:"));
  for (const std::string& line : {"[\"text\"]", "{\"text\": 5}", "{\"text\": \"unterminated}"}) {
    const fs::path other = WriteFile("other.jsonl", "{\"text\": \"ok\"}\n" + line + "\n");
    options.path = other.string();
    status = LoadCalibrationSet(options, tokenizer->get()).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << line;
    EXPECT_THAT(std::string(status.message()),
                HasSubstr(other.string() + ":2: not a JSON object with a string \"text\""))
        << line;
    fs::remove(other);
  }
  options.path = bad.string();
  EXPECT_THAT(std::string(LoadCalibrationSet(options, nullptr).status().message()), HasSubstr("needs a tokenizer"));
  const fs::path blank = WriteFile("blank.jsonl", "\n  \n");
  options.path = blank.string();
  EXPECT_THAT(std::string(LoadCalibrationSet(options, tokenizer->get()).status().message()), HasSubstr("holds no"));
  const fs::path bad_ids = WriteFile("bad.ids", "1 2\n3 x4\n");
  options.path = bad_ids.string();
  EXPECT_THAT(std::string(LoadCalibrationSet(options, nullptr).status().message()), HasSubstr(":2: \"x4\""));
  const fs::path small = WriteFile("small.txt", "Hi.");
  options.path = small.string();
  options.seq_len = 100;
  EXPECT_THAT(std::string(LoadCalibrationSet(options, tokenizer->get()).status().message()),
              HasSubstr("fewer than seq_len"));
  options.num_samples = 0;
  EXPECT_FALSE(LoadCalibrationSet(options, nullptr).ok());
  CalibrationOptions missing;
  missing.path = "/nonexistent/cal.ids";
  EXPECT_EQ(LoadCalibrationSet(missing, nullptr).status().code(), absl::StatusCode::kNotFound);
  for (const fs::path& path : {bad, blank, bad_ids, small}) fs::remove(path);
}

}  // namespace
}  // namespace quark::runtime
