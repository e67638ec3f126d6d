// The importance matrix of the calibration pass (#37 item 3) against llama.cpp's own llama-imatrix (tools/imatrix of
// node-llama-cpp's source bundle, built against its prebuilt libraries) on the same tokens and the same weights:
// llama-imatrix reads the F32 GGUF of the model and a text; our run calibrates on the token ids llama-imatrix makes of
// that text (tokenized with BOS, cut into n_ctx chunks, each chunk's first token set to BOS). llama.cpp runs with an
// F32 KV cache and without flash attention, so that both forwards are float32 throughout. Compared: the entry names,
// every count (per expert for the mixtral), every column's sum within 5e-5 relative, chunk count and size. The
// K-quant export of the same run is what llama_model_quantize makes with that imatrix.gguf.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/checkpoint/model_config.h"
#include "core/export/gguf_file.h"
#include "core/export/gguf_imatrix.h"
#include "core/export/gguf_mixture.h"
#include "core/quantize/quantize_model.h"
#include "core/runtime/tokenizer.h"
#include "tests/export/gguf_llama_cpp.h"
#include "tests/export/gguf_moe_models.h"
#include "tests/export/gguf_test_util.h"
#include "tests/export/llama_cpp_tool.h"
#include "tests/quantize/test_model.h"
#include "tests/support/require_peer.h"

namespace quark {
namespace {

namespace fs = std::filesystem;
using testing::TensorBytes;
using exporter::gguf::ImatrixStats;

constexpr int kCtx = 128;

// llama-imatrix's chunks of `text` (compute_imatrix) as a token-id calibration file, one chunk a line.
absl::StatusOr<int> WriteChunkIds(const std::string& model_dir, const std::string& text, const std::string& path) {
  auto model = checkpoint::LoadModelConfig(model_dir);
  if (!model.ok()) return model.status();
  auto tokenizer = runtime::Tokenizer::Open(model_dir, model->bos_token_id, model->eos_token_id);
  if (!tokenizer.ok()) return tokenizer.status();
  auto content = runtime::ReadTextFile(text);
  if (!content.ok()) return content.status();
  auto ids = (*tokenizer)->EncodeWithBos(*content);
  if (!ids.ok()) return ids.status();
  const int chunks = static_cast<int>(ids->size() / kCtx);
  std::ofstream out(path);
  for (int c = 0; c < chunks; ++c) {
    for (int k = 0; k < kCtx; ++k) out << (k == 0 ? model->bos_token_id : (*ids)[c * kCtx + k]) << (k + 1 < kCtx ? " " : "\n");
  }
  return chunks;
}

QuantizeModelOptions CalibrationImatrixJob(const std::string& ids, int chunks, const std::string& output) {
  QuantizeModelOptions o;
  o.export_formats = {"gguf"};
  o.gguf_type = "Q4_K_M";
  o.gguf_imatrix_from_calibration = true;
  o.calibration_file = ids;
  o.num_calibration_samples = chunks;
  o.seq_len = kCtx;
  o.output_dir = output;
  return o;
}

void ExpectSameStatistics(const ImatrixStats& ours, const ImatrixStats& theirs, const std::string& label) {
  EXPECT_EQ(ours.chunk_count, theirs.chunk_count) << label;
  EXPECT_EQ(ours.chunk_size, theirs.chunk_size) << label;
  ASSERT_EQ(ours.entries.size(), theirs.entries.size()) << label;
  for (const auto& [name, t] : theirs.entries) {
    auto it = ours.entries.find(name);
    ASSERT_NE(it, ours.entries.end()) << label << ": no " << name;
    const exporter::gguf::ImatrixEntry& o = it->second;
    ASSERT_EQ(o.ncols, t.ncols) << label << " " << name;
    EXPECT_EQ(o.counts, t.counts) << label << " " << name;
    ASSERT_EQ(o.sum2.size(), t.sum2.size()) << label << " " << name;
    int64_t differing = 0;
    double worst = 0;
    for (size_t j = 0; j < t.sum2.size(); ++j) {
      const double diff = std::fabs(static_cast<double>(o.sum2[j]) - t.sum2[j]);
      worst = std::max(worst, diff / std::max(std::fabs(static_cast<double>(t.sum2[j])), 1e-30));
      differing += diff > 5e-5 * std::fabs(t.sum2[j]) + 1e-12;
    }
    EXPECT_EQ(differing, 0) << label << " " << name << ": largest relative difference " << worst;
  }
}

// Our export's tensors are llama_model_quantize's from the F32 file with the quant weights of our imatrix.gguf.
void ExpectExportIsLlamaQuantizeWith(const testing::LlamaCpp& l, const std::string& f32, const std::string& dir,
                                     const std::string& label) {
  auto stats = exporter::gguf::ReadImatrix(dir + "/imatrix.gguf");
  ASSERT_TRUE(stats.ok()) << label << ": " << stats.status();
  std::map<std::string, std::vector<float>> weights;  // what llama-quantize's load_imatrix makes of it
  for (const auto& [name, e] : stats->entries) {
    for (int64_t s = 0; s < e.Slices(); ++s) {
      const std::vector<float> w = exporter::gguf::QuantWeights(e, s);
      weights[name].insert(weights[name].end(), w.begin(), w.end());
    }
  }
  const std::string theirs_path = testing::TempPath("quark_calib_imatrix_llama") + ".gguf";
  const auto ftype = static_cast<int>((*exporter::gguf::ParseFileType("Q4_K_M"))->ftype);
  ASSERT_EQ(l.model_quantize_imatrix(f32, theirs_path, ftype, weights), 0u) << label;
  auto ours = exporter::gguf::GgufFile::Open(dir + "/model.gguf");
  auto theirs = exporter::gguf::GgufFile::Open(theirs_path);
  ASSERT_TRUE(ours.ok() && theirs.ok()) << label;
  for (const exporter::gguf::TensorInfo& t : (*theirs)->tensors()) {
    const exporter::gguf::TensorInfo* o = (*ours)->FindTensor(t.name);
    ASSERT_NE(o, nullptr) << label << " " << t.name;
    ASSERT_EQ(o->type, t.type) << label << " " << t.name;
    EXPECT_TRUE(TensorBytes(**ours, *o) == TensorBytes(**theirs, t)) << label << " " << t.name;
  }
}

TEST(GgufCalibrationImatrixTest, EqualsLlamaImatrixOnTheSameTokens) {
  std::string why;
  const testing::LlamaCpp* l = testing::LoadLlamaCpp(&why);
  if (l == nullptr || l->model_quantize_imatrix == nullptr) QUARK_PEER_MISSING() << "libllama not loaded: " << why;
  const std::string imatrix_tool = testing::BuildLlamaCppTool("imatrix", &why);
  if (imatrix_tool.empty()) QUARK_PEER_MISSING() << why;
  const std::string text = testing::SmallEvalText(4000);
  const std::string moe = testing::TempPath("quark_calib_imatrix_mixtral");
  ASSERT_TRUE(testing::WriteTransplantedMoeModel("mixtral", testing::FixturePath("tinyllama-a"), moe).ok());
  for (const std::string& model : {testing::FixturePath("tinyllama-a"), moe}) {
    const std::string work = testing::TempPath("quark_calib_imatrix");
    fs::create_directories(work);
    testing::GgufTestExport f32;
    f32.model_dir = model;
    f32.output_file = work + "/f32.gguf";
    f32.options.type = exporter::gguf::GgmlType::kF32;
    ASSERT_TRUE(testing::ExportGguf(f32).ok()) << model;
    const std::string theirs = work + "/theirs.gguf";
    ASSERT_TRUE(testing::RunLogged(imatrix_tool + " -m " + f32.output_file + " -f " + text + " -c " +
                                       std::to_string(kCtx) + " -b " + std::to_string(kCtx) +
                                       " -t 1 -ctk f32 -ctv f32 -fa off --no-ppl -o " + theirs,
                                   work + "/llama-imatrix.log", &why))
        << why;
    auto chunks = WriteChunkIds(model, text, work + "/calib.ids");
    ASSERT_TRUE(chunks.ok()) << chunks.status();
    ASSERT_GE(*chunks, 10) << model;
    auto report = QuantizeModel(model, CalibrationImatrixJob(work + "/calib.ids", *chunks, work + "/ours"));
    ASSERT_TRUE(report.ok()) << model << ": " << report.status();
    EXPECT_NE(std::find(report->files.begin(), report->files.end(), "imatrix.gguf"), report->files.end());
    auto ours_stats = exporter::gguf::ReadImatrix(work + "/ours/imatrix.gguf");
    auto theirs_stats = exporter::gguf::ReadImatrix(theirs);
    ASSERT_TRUE(ours_stats.ok() && theirs_stats.ok()) << model;
    EXPECT_EQ(ours_stats->datasets, std::vector<std::string>{"calib.ids"});
    ExpectSameStatistics(*ours_stats, *theirs_stats, model);
    ExpectExportIsLlamaQuantizeWith(*l, f32.output_file, work + "/ours", model);
  }
}

TEST(GgufCalibrationImatrixTest, ExpertsCountOnlyTheirRoutedTokens) {
  const std::string moe = testing::TempPath("quark_calib_imatrix_mixtral");
  ASSERT_TRUE(testing::WriteTransplantedMoeModel("mixtral", testing::FixturePath("tinyllama-a"), moe).ok());
  const std::string work = testing::TempPath("quark_calib_imatrix");
  fs::create_directories(work);
  auto chunks = WriteChunkIds(moe, testing::SmallEvalText(1500), work + "/calib.ids");
  ASSERT_TRUE(chunks.ok()) << chunks.status();
  auto report = QuantizeModel(moe, CalibrationImatrixJob(work + "/calib.ids", *chunks, work + "/ours"));
  ASSERT_TRUE(report.ok()) << report.status();
  auto stats = exporter::gguf::ReadImatrix(work + "/ours/imatrix.gguf");
  ASSERT_TRUE(stats.ok()) << stats.status();
  const float tokens = static_cast<float>(*chunks * kCtx);
  for (int layer = 0; layer < 4; ++layer) {
    const std::string blk = "blk." + std::to_string(layer) + ".";
    ASSERT_EQ(stats->entries.count(blk + "ffn_gate_exps.weight"), 1u) << blk;
    const auto& experts = stats->entries.at(blk + "ffn_gate_exps.weight");
    ASSERT_EQ(experts.counts.size(), 4u);
    float routed = 0;
    for (float c : experts.counts) routed += c;
    EXPECT_EQ(routed, 2 * tokens) << blk << ": top-2 routing, every token counted twice";
    EXPECT_EQ(stats->entries.at(blk + "ffn_gate_inp.weight").counts, std::vector<float>{tokens}) << blk;
    EXPECT_EQ(stats->entries.at(blk + "attn_q.weight").counts, std::vector<float>{tokens}) << blk;
  }
}

// llama-imatrix's collect_imatrix skips a plain matrix multiplication of fewer than 16 rows (the dense linears and
// the router) but counts the experts' indirect one whatever its size: windows of 8 tokens leave no dense entry and
// count every routed token.
TEST(GgufCalibrationImatrixTest, ForwardsOfFewerThan16RowsCountOnlyForExperts) {
  const std::string moe = testing::TempPath("quark_calib_imatrix_mixtral_short");
  ASSERT_TRUE(testing::WriteTransplantedMoeModel("mixtral", testing::FixturePath("tinyllama-a"), moe).ok());
  const std::string work = testing::TempPath("quark_calib_imatrix_short");
  fs::create_directories(work);
  auto chunks = WriteChunkIds(moe, testing::SmallEvalText(1500), work + "/calib.ids");
  ASSERT_TRUE(chunks.ok()) << chunks.status();
  QuantizeModelOptions job = CalibrationImatrixJob(work + "/calib.ids", *chunks, work + "/ours");
  constexpr int kShort = 8;
  job.seq_len = kShort;
  auto report = QuantizeModel(moe, job);
  ASSERT_TRUE(report.ok()) << report.status();
  auto stats = exporter::gguf::ReadImatrix(work + "/ours/imatrix.gguf");
  ASSERT_TRUE(stats.ok()) << stats.status();
  for (const auto& [name, entry] : stats->entries) {
    EXPECT_NE(name.find("_exps."), std::string::npos) << name << ": a dense matrix counted a batch of " << kShort;
  }
  const float tokens = static_cast<float>(*chunks * kShort);
  for (int layer = 0; layer < 4; ++layer) {
    const std::string blk = "blk." + std::to_string(layer) + ".";
    ASSERT_EQ(stats->entries.count(blk + "ffn_down_exps.weight"), 1u) << blk;
    float routed = 0;
    for (float c : stats->entries.at(blk + "ffn_down_exps.weight").counts) routed += c;
    EXPECT_EQ(routed, 2 * tokens) << blk << ": top-2 routing, every token counted twice";
  }
}

TEST(GgufCalibrationImatrixTest, BadRequestsNameTheField) {
  const std::string model = testing::FixturePath("tinyllama-a");
  const std::string work = testing::TempPath("quark_calib_imatrix_bad");
  auto job = CalibrationImatrixJob("", 4, work + "/a");
  job.gguf_imatrix = work + "/given.gguf";
  auto both = QuantizeModel(model, job);
  EXPECT_EQ(both.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(both.status().message().find("gguf_imatrix_from_calibration"), std::string::npos) << both.status();

  job = CalibrationImatrixJob("", 4, work + "/b");
  auto no_data = QuantizeModel(model, job);
  EXPECT_EQ(no_data.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(no_data.status().message().find("calibration_file: the importance matrix"), std::string::npos)
      << no_data.status();

  job = CalibrationImatrixJob("", 4, work + "/c");
  job.export_formats = {"hf_quark"};
  job.gguf_type.clear();
  auto config = testing::GgufTestConfig("uint4_wo_32");
  ASSERT_TRUE(config.ok()) << config.status();
  job.config = *config;
  auto no_gguf = QuantizeModel(model, job);
  EXPECT_NE(no_gguf.status().message().find("gguf_imatrix_from_calibration: set, but gguf"), std::string::npos)
      << no_gguf.status();
}

}  // namespace
}  // namespace quark
