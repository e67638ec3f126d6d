// llama-quantize's mixtures (#37): our per-tensor types, bytes and general.file_type against llama.cpp's own
// llama_model_quantize (libllama of node-llama-cpp, run on the F32 GGUF of the same model) for every file type we
// accept, on tinyllama-a (untied, 4 layers), stories260K (tied, 64 wide: every K-quant falls back, 172-wide
// ffn_down to F16) and a mixtral grown from tinyllama-a; then the rules those models cannot reach (32 layers, GQA 4,
// 8 experts) as a table from src/llama-quant.cpp.
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/export/gguf_file.h"
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

std::string ExportAs(const std::string& model, const gguf::FileType* file_type, bool pure) {
  testing::GgufTestExport job;
  job.model_dir = model;
  const std::string dir = testing::TempPath("quark_gguf_mix");
  fs::create_directories(dir);
  job.output_file = dir + "/model.gguf";
  if (file_type) {
    job.options.file_type = file_type;
    job.options.pure = pure;
  } else {
    job.options.type = GgmlType::kF32;
  }
  auto files = testing::ExportGguf(job);
  EXPECT_TRUE(files.ok()) << files.status();
  return job.output_file;
}

// Every tensor of `ours` has the type, shape and bytes of the same tensor of `theirs`.
void ExpectSameFile(const std::string& ours_path, const std::string& theirs_path, const std::string& label) {
  auto theirs = gguf::GgufFile::Open(theirs_path);
  auto ours = gguf::GgufFile::Open(ours_path);
  ASSERT_TRUE(theirs.ok() && ours.ok()) << label;
  ASSERT_EQ((*ours)->tensors().size(), (*theirs)->tensors().size()) << label;
  for (const gguf::TensorInfo& t : (*theirs)->tensors()) {
    const gguf::TensorInfo* o = (*ours)->FindTensor(t.name);
    ASSERT_NE(o, nullptr) << label << " " << t.name;
    EXPECT_EQ(gguf::FindType(o->type)->name, std::string(gguf::FindType(t.type)->name)) << label << " " << t.name;
    EXPECT_EQ(o->ne, t.ne) << label << " " << t.name;
    if (o->type == t.type) {
      EXPECT_TRUE(TensorBytes(**ours, *o) == TensorBytes(**theirs, t)) << label << " " << t.name << " bytes";
    }
  }
  EXPECT_EQ(*(*ours)->GetInt("general.file_type"), *(*theirs)->GetInt("general.file_type")) << label;
}

TEST(GgufMixtureTest, EveryFileTypeMatchesLlamaQuantize) {
  std::string why;
  const testing::LlamaCpp* l = testing::LoadLlamaCpp(&why);
  if (l == nullptr || l->model_quantize == nullptr) {
    QUARK_PEER_MISSING() << "libllama not loaded: " << why;
  }
  const std::string moe = testing::TempPath("quark_mix_mixtral");
  ASSERT_TRUE(testing::WriteTransplantedMoeModel("mixtral", testing::FixturePath("tinyllama-a"), moe).ok());
  const char* kNames[] = {"Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K",
                          "IQ4_NL", "IQ4_XS", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"};
  for (const std::string& model : {testing::FixturePath("tinyllama-a"), testing::FixturePath("stories260K"), moe}) {
    const std::string f32 = ExportAs(model, nullptr, false);
    for (const char* name : kNames) {
      const gguf::FileType* ft = *gguf::ParseFileType(name);
      for (bool pure : {false, true}) {
        if (pure && ft->default_type != GgmlType::kQ4_K && ft->default_type != GgmlType::kIQ4_XS) continue;
        const std::string label = model + " " + name + (pure ? " pure" : "");
        const std::string theirs = testing::TempPath("quark_mix_llama") + ".gguf";
        ASSERT_EQ(l->model_quantize(f32, theirs, static_cast<int>(ft->ftype), pure), 0u) << label;
        const std::string ours = ExportAs(model, ft, pure);
        ExpectSameFile(ours, theirs, label);
        fs::remove(theirs);
        fs::remove_all(fs::path(ours).parent_path());
      }
    }
    fs::remove_all(fs::path(f32).parent_path());
  }
  fs::remove_all(moe);
}

std::string TypeOf(const char* ftype, const gguf::MixtureModel& m, const std::string& name, int64_t ncols = 4096,
                   bool imatrix = false) {
  return gguf::FindType(gguf::ChooseTensorType(**gguf::ParseFileType(ftype), false, imatrix, m, name, ncols).type)->name;
}

std::string Blk(int i, const char* what) { return "blk." + std::to_string(i) + "." + what + ".weight"; }

TEST(GgufMixtureTest, RulesOfLargerModels) {
  gguf::MixtureModel m{32, 32, 8, 0, false};  // Llama-3-8B's: GQA 4, untied
  // use_more_bits(i, 32): i < 4, i >= 28, (i - 4) % 3 == 2.
  for (int i : {0, 3, 6, 9, 27, 28, 31}) EXPECT_EQ(TypeOf("Q4_K_M", m, Blk(i, "attn_v")), "Q6_K") << i;
  for (int i : {4, 5, 7, 26}) EXPECT_EQ(TypeOf("Q4_K_M", m, Blk(i, "attn_v")), "Q4_K") << i;
  EXPECT_EQ(TypeOf("Q4_K_M", m, Blk(6, "ffn_down")), "Q6_K");
  EXPECT_EQ(TypeOf("Q4_K_M", m, Blk(7, "ffn_down")), "Q4_K");
  EXPECT_EQ(TypeOf("Q4_K_M", m, Blk(7, "attn_q")), "Q4_K");
  EXPECT_EQ(TypeOf("Q4_K_M", m, "output.weight"), "Q6_K");
  EXPECT_EQ(TypeOf("Q4_K_M", m, "token_embd.weight"), "Q4_K");
  EXPECT_EQ(TypeOf("Q5_K_M", m, Blk(31, "ffn_down")), "Q6_K");
  EXPECT_EQ(TypeOf("Q3_K_M", m, Blk(1, "attn_v")), "Q5_K");
  EXPECT_EQ(TypeOf("Q3_K_M", m, Blk(2, "attn_v")), "Q4_K");
  EXPECT_EQ(TypeOf("Q3_K_M", m, Blk(1, "ffn_down")), "Q5_K");
  EXPECT_EQ(TypeOf("Q3_K_M", m, Blk(2, "ffn_down")), "Q4_K");
  EXPECT_EQ(TypeOf("Q3_K_M", m, Blk(2, "attn_output")), "Q4_K");
  EXPECT_EQ(TypeOf("Q4_K_S", m, Blk(3, "attn_v")), "Q5_K");
  EXPECT_EQ(TypeOf("Q4_K_S", m, Blk(4, "attn_v")), "Q4_K");
  EXPECT_EQ(TypeOf("Q4_K_S", m, Blk(3, "ffn_down")), "Q5_K");
  EXPECT_EQ(TypeOf("Q2_K", m, Blk(9, "attn_v")), "Q4_K");  // n_gqa >= 4
  EXPECT_EQ(TypeOf("Q2_K", m, Blk(9, "ffn_down")), "Q3_K");
  EXPECT_EQ(TypeOf("Q2_K", m, Blk(9, "attn_output")), "Q3_K");
  EXPECT_EQ(TypeOf("IQ4_XS", m, Blk(9, "attn_v")), "Q5_K");
  EXPECT_EQ(TypeOf("IQ4_XS", m, Blk(3, "ffn_down")), "Q5_K");
  EXPECT_EQ(TypeOf("IQ4_XS", m, Blk(3, "ffn_down"), 4096, /*imatrix=*/true), "IQ4_XS");
  EXPECT_EQ(TypeOf("Q4_0", m, Blk(3, "ffn_down"), 4096, /*imatrix=*/true), "Q4_1");
  EXPECT_EQ(TypeOf("Q4_0", m, "output.weight"), "Q6_K");  // the legacy types' default bump
  EXPECT_EQ(TypeOf("Q8_0", m, "output.weight"), "Q8_0");
  EXPECT_EQ(TypeOf("Q4_0", m, "output.weight", 4000), "Q8_0");  // ncols % 32 != 0
  EXPECT_EQ(TypeOf("F16", m, "output.weight"), "F16");
  m.tied_embeddings = true;
  EXPECT_EQ(TypeOf("Q4_K_M", m, "token_embd.weight"), "Q6_K");
  m = {32, 32, 8, 8, false};  // Mixtral's 8 experts
  EXPECT_EQ(TypeOf("Q4_K_M", m, Blk(5, "attn_v")), "Q8_0");
  EXPECT_EQ(TypeOf("Q4_K_M", m, Blk(5, "attn_k")), "Q8_0");
  EXPECT_EQ(TypeOf("Q4_K_M", m, Blk(5, "attn_output")), "Q5_K");
  EXPECT_EQ(TypeOf("Q5_K_M", m, Blk(5, "attn_output")), "Q5_K");
  EXPECT_EQ(TypeOf("Q4_K_M", m, Blk(6, "ffn_down_exps")), "Q6_K");
  m = {32, 32, 32, 0, false};  // Llama-2-7B: no GQA
  EXPECT_EQ(TypeOf("Q2_K", m, Blk(9, "attn_v")), "Q3_K");
  EXPECT_EQ(TypeOf("IQ4_XS", m, Blk(9, "attn_v")), "IQ4_XS");
}

TEST(GgufMixtureTest, FallbacksAreNamedAndUnknownTypesListTheNames) {
  const gguf::MixtureModel m{32, 32, 8, 0, false};
  const auto choice = gguf::ChooseTensorType(**gguf::ParseFileType("Q4_K_M"), false, false, m, Blk(7, "attn_q"), 4000);
  EXPECT_EQ(choice.type, GgmlType::kQ5_0);
  EXPECT_EQ(choice.fallback, "blk.7.attn_q.weight - ncols 4000 not divisible by 256 (required for type Q4_K) -> "
                             "falling back to Q5_0");
  EXPECT_EQ(gguf::ChooseTensorType(**gguf::ParseFileType("q6_k"), true, false, m, Blk(0, "ffn_down"), 172).type,
            GgmlType::kF16);
  EXPECT_EQ(gguf::ChooseTensorType(**gguf::ParseFileType("IQ4_XS"), true, false, m, Blk(0, "ffn_up"), 96).type,
            GgmlType::kIQ4_NL);
  EXPECT_TRUE(gguf::ChooseTensorType(**gguf::ParseFileType("Q4_K_S"), false, false, m, Blk(0, "ffn_up"), 512)
                  .fallback.empty());
  const auto bad = gguf::ParseFileType("Q4_K");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(bad.status().message()).find("gguf_type: \"Q4_K\" is not one of F32, F16"), std::string::npos);
  EXPECT_NE(std::string(bad.status().message()).find("Q4_K_M"), std::string::npos);
}

}  // namespace
}  // namespace quark::exporter
