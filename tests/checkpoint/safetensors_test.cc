// Reading, writing and strict validation of safetensors files.
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/checkpoint_writer.h"
#include "core/checkpoint/safetensors_header.h"

namespace quark::checkpoint {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// A file image: 8-byte length, `header`, then `data_bytes` bytes of data.
std::string Image(const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return out + header + std::string(data_bytes, '\x01');
}

absl::Status Check(const std::string& image) { return SafetensorsFile::Validate(image, "f.safetensors").status(); }

fs::path TempDir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("quark_ckpt_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(SafetensorsHeaderTest, AcceptsAValidFileWithMetadataAndEveryDtype) {
  int count = 0;
  const StDTypeTraits* all = AllStDTypes(&count);
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
  uint64_t offset = 0;
  for (int i = 0; i < count; ++i) {
    const uint64_t bytes = 3 * static_cast<uint64_t>(all[i].bytes);
    header += ",\"t" + std::to_string(i) + "\":{\"dtype\":\"" + std::string(all[i].name) + "\",\"shape\":[3],\"data_offsets\":[" +
              std::to_string(offset) + "," + std::to_string(offset + bytes) + "]}";
    offset += bytes;
  }
  header += "}";
  auto parsed = SafetensorsFile::Validate(Image(header, offset), "f");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->tensors.size(), static_cast<size_t>(count));
  EXPECT_EQ(parsed->metadata.at("format"), "pt");
  EXPECT_EQ(parsed->tensors[parsed->Find("t3")].dtype, StDType::kF8E4M3);
  // #30: float8_e8m0fnu (vLLM's dtype of E8M0 128x128 block scales), one byte.
  EXPECT_EQ(ParseStDType("F8_E8M0"), StDType::kF8E8M0);
  EXPECT_EQ(StDTypeSize(StDType::kF8E8M0), 1);
}

TEST(SafetensorsHeaderTest, AcceptsScalarsAndEmptyTensors) {
  const std::string header =
      R"({"s":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"e":{"dtype":"BF16","shape":[0,5],"data_offsets":[4,4]}})";
  EXPECT_TRUE(Check(Image(header, 4)).ok());
}

struct CorruptCase {
  const char* name;
  std::string image;
  const char* message;  // expected in the error
};

std::vector<CorruptCase> CorruptCases() {
  const std::string ok_entry = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  std::string huge_len(8, '\0');
  huge_len[0] = '\x10';
  huge_len[1] = '\x27';  // 10000 bytes of header in a 20-byte file
  return {
      {"too_short", std::string(5, '\0'), "too short"},
      {"header_past_end", huge_len + "{}", "runs past the end"},
      {"bad_json", Image("{\"a\": [1,", 0), "not valid JSON"},
      {"not_object", Image("[1,2]", 0), "not a JSON object"},
      {"duplicate", Image("{" + ok_entry + "," + ok_entry + "}", 8), "duplicate key \"a\""},
      {"unknown_dtype", Image(R"({"a":{"dtype":"F12","shape":[2],"data_offsets":[0,8]}})", 8), "unknown dtype \"F12\""},
      {"size_mismatch", Image(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8), "need 12 bytes"},
      {"negative_dim", Image(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8), "not a non-negative integer"},
      {"overflow", Image(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8), "overflows"},
      {"reversed", Image(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8), "reversed"},
      {"past_end", Image(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8), "past the end of the file"},
      {"overlap", Image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8),
       "overlaps tensor \"a\""},
      {"gap", Image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})", 12),
       "gap of 4 bytes"},
      {"trailing", Image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 12), "8 bytes after the last tensor"},
      {"missing_offsets", Image(R"({"a":{"dtype":"F32","shape":[1]}})", 4), "data_offsets"},
      {"float_offsets", Image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0.0,4]}})", 4), "data_offsets"},
      {"bad_metadata", Image(R"({"__metadata__":{"x":1}})", 0), "__metadata__"},
  };
}

TEST(SafetensorsHeaderTest, RefusesEveryKindOfCorruptFileWithAMessageNamingIt) {
  for (const CorruptCase& c : CorruptCases()) {
    const absl::Status status = Check(c.image);
    EXPECT_FALSE(status.ok()) << c.name;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.message)) << c.name;
    EXPECT_THAT(std::string(status.message()), HasSubstr("f.safetensors")) << c.name;
  }
}

TEST(SafetensorsHeaderTest, ErrorsGiveTheFileByteOffset) {
  const std::string header = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})";
  const absl::Status status = Check(Image(header, 12));
  EXPECT_THAT(std::string(status.message()), HasSubstr("at file byte " + std::to_string(8 + header.size() + 8)));
}

TEST(SafetensorsHeaderTest, SurvivesRandomBytes) {
  std::mt19937 rng(7);
  const std::string valid = Image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string image = valid;
    for (int k = 0; k < 3; ++k) image[rng() % image.size()] = static_cast<char>(rng());
    image.resize(rng() % (image.size() + 1));
    (void)Check(image);  // any result, never a crash
  }
}

std::vector<PlannedTensor> Plan() {
  return {{"w.a", StDType::kF32, {4, 3}}, {"w.b", StDType::kBF16, {5}}, {"w.c", StDType::kI32, {2, 2}},
          {"w.d", StDType::kF8E4M3, {7}}, {"w.e", StDType::kU8, {}}};
}

std::string Bytes(const PlannedTensor& t, char fill) {
  int64_t n = StDTypeSize(t.dtype);
  for (int64_t d : t.shape) n *= d;
  std::string out(static_cast<size_t>(n), fill);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<char>(fill + i);
  return out;
}

void WriteAll(const fs::path& dir, CheckpointWriterOptions options, std::vector<std::string>* shards) {
  auto writer = CheckpointWriter::Create(dir.string(), Plan(), options);
  ASSERT_TRUE(writer.ok()) << writer.status();
  auto plan = Plan();
  for (auto it = plan.rbegin(); it != plan.rend(); ++it) {  // any order
    ASSERT_TRUE((*writer)->Write(it->name, Bytes(*it, it->name.back())).ok());
  }
  ASSERT_TRUE((*writer)->Finish().ok());
  *shards = (*writer)->ShardFileNames();
}

void ExpectReadsBack(const fs::path& dir) {
  auto reader = CheckpointReader::Open(dir.string());
  ASSERT_TRUE(reader.ok()) << reader.status();
  for (const PlannedTensor& t : Plan()) {
    auto ref = (*reader)->Get(t.name);
    ASSERT_TRUE(ref.ok()) << t.name;
    EXPECT_EQ(ref->info->dtype, t.dtype);
    EXPECT_EQ(ref->info->shape, t.shape);
    EXPECT_EQ(std::string(ref->bytes()), Bytes(t, t.name.back()));
  }
  EXPECT_FALSE((*reader)->Get("nope").ok());
}

TEST(CheckpointWriterTest, SingleFileRoundTrip) {
  const fs::path dir = TempDir("single");
  std::vector<std::string> shards;
  WriteAll(dir, {}, &shards);
  EXPECT_EQ(shards, std::vector<std::string>{"model.safetensors"});
  EXPECT_FALSE(fs::exists(dir / "model.safetensors.index.json"));
  ExpectReadsBack(dir);
  auto file = SafetensorsFile::Open((dir / "model.safetensors").string());
  ASSERT_TRUE(file.ok());
  EXPECT_EQ((*file)->header().metadata.at("format"), "pt");
  EXPECT_EQ((*file)->header().data_offset % 8, 0u);
  fs::remove_all(dir);
}

TEST(CheckpointWriterTest, ShardsBySizeWithAnIndex) {
  const fs::path dir = TempDir("sharded");
  CheckpointWriterOptions options;
  options.max_shard_bytes = 40;
  std::vector<std::string> shards;
  WriteAll(dir, options, &shards);
  ASSERT_EQ(shards.size(), 2u);
  EXPECT_EQ(shards[0], "model-00001-of-00002.safetensors");
  ASSERT_TRUE(fs::exists(dir / "model.safetensors.index.json"));
  ExpectReadsBack(dir);
  fs::remove_all(dir);
}

TEST(CheckpointWriterTest, RefusesWrongSizesDuplicatesAndMissingTensors) {
  const fs::path dir = TempDir("bad");
  auto dup = CheckpointWriter::Create(dir.string(), {{"a", StDType::kF32, {1}}, {"a", StDType::kF32, {1}}});
  EXPECT_FALSE(dup.ok());
  auto writer = CheckpointWriter::Create(dir.string(), {{"a", StDType::kF32, {2}}, {"b", StDType::kF32, {1}}});
  ASSERT_TRUE(writer.ok());
  EXPECT_THAT(std::string((*writer)->Write("a", "abc").message()), HasSubstr("3 bytes given, 8 expected"));
  EXPECT_FALSE((*writer)->Write("zz", "abcd").ok());
  ASSERT_TRUE((*writer)->Write("b", "abcd").ok());
  EXPECT_FALSE((*writer)->Write("b", "abcd").ok());
  EXPECT_THAT(std::string((*writer)->Finish().message()), HasSubstr("\"a\" was never written"));
  writer->reset();
  EXPECT_FALSE(fs::exists(dir / "model.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "model.safetensors.partial"));
  fs::remove_all(dir);
}

TEST(CheckpointReaderTest, RefusesAnIndexNamingAMissingShardOrTensor) {
  const fs::path dir = TempDir("index");
  CheckpointWriterOptions options;
  options.max_shard_bytes = 40;
  std::vector<std::string> shards;
  WriteAll(dir, options, &shards);
  {
    std::ofstream index(dir / "model.safetensors.index.json", std::ios::trunc);
    index << R"({"weight_map":{"w.a":"model-00001-of-00002.safetensors","ghost":"model-00002-of-00002.safetensors"}})";
  }
  auto reader = CheckpointReader::Open(dir.string());
  ASSERT_FALSE(reader.ok());
  EXPECT_THAT(std::string(reader.status().message()), HasSubstr("\"ghost\""));
  {
    std::ofstream index(dir / "model.safetensors.index.json", std::ios::trunc);
    index << R"({"weight_map":{"w.a":"../etc/passwd"}})";
  }
  EXPECT_FALSE(CheckpointReader::Open(dir.string()).ok());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace quark::checkpoint
