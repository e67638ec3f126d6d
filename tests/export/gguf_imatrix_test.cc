// Importance matrices (#37): our GGUF imatrix file reads back as written and in llama.cpp's layout; an export with
// an imatrix is byte-identical to llama.cpp's llama_model_quantize given the same quant weights (what its
// load_imatrix makes of the file) for the K-quant, IQ4 and legacy (Q4_0..Q5_1) file types, on tinyllama-a and on a
// mixtral whose stacked experts take one slice each; bad imatrices are refused naming the tensor.
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/export/gguf_file.h"
#include "core/export/gguf_imatrix.h"
#include "core/export/gguf_mixture.h"
#include "tests/export/gguf_llama_cpp.h"
#include "tests/export/gguf_moe_models.h"
#include "tests/export/gguf_test_util.h"
#include "tests/quantize/test_model.h"
#include "tests/support/require_peer.h"

namespace quark::exporter {
namespace {

namespace fs = std::filesystem;
using testing::TensorBytes;
using gguf::GgmlType;

absl::StatusOr<std::string> ExportWith(const std::string& model, const char* file_type,
                                       std::shared_ptr<const gguf::ImatrixStats> imatrix) {
  testing::GgufTestExport job;
  job.model_dir = model;
  const std::string dir = testing::TempPath("quark_gguf_imatrix");
  fs::create_directories(dir);
  job.output_file = dir + "/model.gguf";
  if (file_type) {
    job.options.file_type = *gguf::ParseFileType(file_type);
  } else {
    job.options.type = GgmlType::kF32;
  }
  job.options.imatrix = std::move(imatrix);
  auto files = testing::ExportGguf(job);
  if (!files.ok()) return files.status();
  return job.output_file;
}

// Seeded statistics for every blk.* matrix of the F32 file: log-normal sums, 1..500 tokens per slice, a zero count.
gguf::ImatrixStats RandomStats(const gguf::GgufFile& f32, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  gguf::ImatrixStats stats;
  stats.datasets = {"seeded"};
  stats.chunk_count = 3;
  stats.chunk_size = 512;
  for (const gguf::TensorInfo& t : f32.tensors()) {
    if (t.name.rfind("blk.", 0) != 0 || t.ne.size() < 2 || t.name.find("_norm") != std::string::npos ||
        t.name.find("ffn_gate_inp") != std::string::npos) {
      continue;
    }
    gguf::ImatrixEntry& e = stats.entries[t.name];
    e.ncols = t.ne[0];
    const int64_t slices = t.ne.size() > 2 ? t.ne[2] : 1;
    for (int64_t i = 0; i < e.ncols * slices; ++i) e.sum2.push_back(100.0f * std::exp(2.0f * normal(gen)));
    for (int64_t s = 0; s < slices; ++s) e.counts.push_back(static_cast<float>(1 + gen() % 500));
  }
  stats.entries.begin()->second.counts[0] = 0;  // a slice no token reached: weights 1
  return stats;
}

TEST(GgufImatrixTest, ExportsMatchLlamaQuantizeWithTheSameImatrix) {
  std::string why;
  const testing::LlamaCpp* l = testing::LoadLlamaCpp(&why);
  if (l == nullptr || l->model_quantize_imatrix == nullptr) {
    QUARK_PEER_MISSING() << "libllama not loaded: " << why;
  }
  const std::string moe = testing::TempPath("quark_imatrix_mixtral");
  ASSERT_TRUE(testing::WriteTransplantedMoeModel("mixtral", testing::FixturePath("tinyllama-a"), moe).ok());
  for (const std::string& model : {testing::FixturePath("tinyllama-a"), moe}) {
    auto f32_path = ExportWith(model, nullptr, nullptr);
    ASSERT_TRUE(f32_path.ok()) << f32_path.status();
    auto f32 = gguf::GgufFile::Open(*f32_path);
    ASSERT_TRUE(f32.ok());
    // Through the file: what we write is what we (and llama.cpp's loader, same layout) read.
    const std::string file = testing::TempPath("quark_imatrix") + ".gguf";
    ASSERT_TRUE(gguf::WriteImatrixGguf(RandomStats(**f32, 7), file).ok());
    auto stats = gguf::ReadImatrix(file);
    ASSERT_TRUE(stats.ok()) << stats.status();
    auto imatrix_file = gguf::GgufFile::Open(file);
    ASSERT_TRUE(imatrix_file.ok());
    EXPECT_EQ(*(*imatrix_file)->GetString("general.type"), "imatrix");
    EXPECT_EQ(*(*imatrix_file)->GetInt("imatrix.chunk_size"), 512);
    std::map<std::string, std::vector<float>> weights;  // load_imatrix's result
    for (const auto& [name, e] : stats->entries) {
      EXPECT_EQ((*imatrix_file)->FindTensor(name + ".in_sum2")->ne, (std::vector<int64_t>{e.ncols, e.Slices()}));
      for (int64_t s = 0; s < e.Slices(); ++s) {
        const std::vector<float> w = gguf::QuantWeights(e, s);
        weights[name].insert(weights[name].end(), w.begin(), w.end());
      }
    }
    auto shared = std::make_shared<const gguf::ImatrixStats>(*std::move(stats));
    for (const char* name : {"Q4_K_M", "Q2_K", "Q3_K_M", "Q5_K_S", "Q6_K", "IQ4_XS", "IQ4_NL", "Q4_0", "Q4_1", "Q5_0",
                             "Q5_1"}) {
      const std::string label = model + " " + name;
      const std::string theirs_path = testing::TempPath("quark_imatrix_llama") + ".gguf";
      ASSERT_EQ(l->model_quantize_imatrix(*f32_path, theirs_path, static_cast<int>((*gguf::ParseFileType(name))->ftype),
                                          weights), 0u) << label;
      auto ours_path = ExportWith(model, name, shared);
      ASSERT_TRUE(ours_path.ok()) << label << ": " << ours_path.status();
      auto ours = gguf::GgufFile::Open(*ours_path);
      auto theirs = gguf::GgufFile::Open(theirs_path);
      ASSERT_TRUE(ours.ok() && theirs.ok()) << label;
      for (const gguf::TensorInfo& t : (*theirs)->tensors()) {
        const gguf::TensorInfo* o = (*ours)->FindTensor(t.name);
        ASSERT_NE(o, nullptr) << label << " " << t.name;
        ASSERT_EQ(o->type, t.type) << label << " " << t.name;
        EXPECT_TRUE(TensorBytes(**ours, *o) == TensorBytes(**theirs, t)) << label << " " << t.name;
      }
      fs::remove(theirs_path);
      fs::remove_all(fs::path(*ours_path).parent_path());
    }
    fs::remove(file);
    fs::remove_all(fs::path(*f32_path).parent_path());
  }
  fs::remove_all(moe);
}

TEST(GgufImatrixTest, BadImatricesAreRefusedNamingTheTensor) {
  const std::string model = testing::FixturePath("tinyllama-a");
  auto stats = std::make_shared<gguf::ImatrixStats>();
  stats->entries["blk.0.attn_q.weight"] = {256, std::vector<float>(256, 1.0f), {10.0f}, false};
  stats->entries["blk.9.attn_q.weight"] = {256, std::vector<float>(256, 1.0f), {10.0f}, false};
  auto r = ExportWith(model, "Q4_K_M", stats);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("imatrix: \"blk.9.attn_q.weight\" is no tensor"), std::string::npos)
      << r.status();
  stats->entries.erase("blk.9.attn_q.weight");
  stats->entries["blk.0.ffn_down.weight"] = {256, std::vector<float>(256, 1.0f), {10.0f}, false};  // has 768 columns
  r = ExportWith(model, "Q4_K_M", stats);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("imatrix: blk.0.ffn_down.weight: 256 values"), std::string::npos)
      << r.status();
  stats->entries.erase("blk.0.ffn_down.weight");
  EXPECT_TRUE(ExportWith(model, "Q4_K_S", stats).ok());
  // Files: a truncated legacy .dat and a GGUF that is no imatrix.
  const std::string dat = testing::TempPath("quark_bad") + ".dat";
  std::ofstream(dat, std::ios::binary).write("\x01\x00\x00\x00\x05\x00\x00\x00" "abc", 11);
  EXPECT_NE(std::string(gguf::ReadImatrix(dat).status().message()).find("entry 0: name length"), std::string::npos);
  auto f32 = ExportWith(model, nullptr, nullptr);
  ASSERT_TRUE(f32.ok());
  EXPECT_NE(std::string(gguf::ReadImatrix(*f32).status().message()).find("general.type is not \"imatrix\""),
            std::string::npos);
  fs::remove(dat);
  fs::remove_all(fs::path(*f32).parent_path());
}

TEST(GgufImatrixTest, LegacyDatIsReadAsLlamaQuantizeDoes) {
  // One entry "blk.0.attn_q.weight", ncall 4, values mean·ncall; trailer: 4 chunks, dataset "wiki".
  std::string bytes;
  auto i32 = [&](int32_t v) { bytes.append(reinterpret_cast<const char*>(&v), 4); };
  const std::string name = "blk.0.attn_q.weight";
  i32(1);
  i32(static_cast<int32_t>(name.size()));
  bytes += name;
  i32(4);
  i32(3);
  for (float v : {8.0f, 2.0f, 0.0f}) bytes.append(reinterpret_cast<const char*>(&v), 4);
  i32(4);
  i32(4);
  bytes += "wiki";
  const std::string path = testing::TempPath("quark_legacy") + ".dat";
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  auto stats = gguf::ReadImatrix(path);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->chunk_count, 4u);
  EXPECT_EQ(stats->datasets, std::vector<std::string>{"wiki"});
  EXPECT_EQ(gguf::QuantWeights(stats->entries.at(name), 0), (std::vector<float>{2.0f, 0.5f, 0.0f}));
  fs::remove(path);
}

}  // namespace
}  // namespace quark::exporter
