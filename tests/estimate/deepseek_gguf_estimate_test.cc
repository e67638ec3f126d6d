// #37: the estimator's DeepSeek-V3 GGUF sizes (deepseek2, core/export/gguf_deepseek_plan.h) against the real
// `quark quantize --export gguf` of a tiny synthetic DeepSeek-V3 (runtime/synthetic_model.h): the file's
// data section equals GgufArtifactSize's data_bytes byte for byte, for F32, Q8_0 and engine codes entering dequantized;
// what the exporter refuses the estimate refuses with the same message.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/checkpoint/deepseek_config.h"
#include "core/config/presets.h"
#include "core/estimate/artifact_size.h"
#include "core/estimate/deepseek_shape.h"
#include "core/estimate/model_shape.h"
#include "core/export/gguf_file.h"
#include "core/runtime/deepseek_synthetic.h"
#include "core/runtime/synthetic_model.h"

namespace quark::estimate {
namespace {

namespace fs = std::filesystem;

std::string Quark() {
  const char* dir = std::getenv("QUARK_BINARY_DIR");
  return std::string(dir ? dir : ".") + "/core/cli/quark";
}
std::string Shared() {
  const char* shared = std::getenv("QUARK_SHARED_DIR");
  return shared ? shared : "/work/shared";
}

class DeepseekGgufEstimateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("quark_deepseek_gguf_estimate_" + std::to_string(getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
    model_ = (root_ / "model").string();
    runtime::SyntheticModelOptions options;
    options.arch = "deepseek_v3";
    options.shape = "tiny";
    options.dtype = "f32";
    options.out_dir = model_;
    options.tokenizer_path = Shared() + "/fixtures/stories260K/tokenizer.model";
    ASSERT_TRUE(runtime::MakeSyntheticModel(options).ok());
    // The tiny shape's YaRN has mscale apart from mscale_all_dim, which deepseek2 cannot express: first the estimate
    // must refuse it as the exporter does, then it gets DeepSeek-V3's own mscale_all_dim = mscale.
    absl::StatusOr<ModelShape> tiny = ReadModelShape(model_);
    ASSERT_TRUE(tiny.ok()) << tiny.status();
    GgufArtifactOptions f32;
    f32.type = "F32";
    const auto yarn = GgufArtifactSize(*tiny, BuildLayerPlan(Config{}, tiny->modules), f32);
    EXPECT_NE(yarn.status().message().find("gguf deepseek2: field \"rope_scaling.mscale\""), std::string::npos)
        << yarn.status();
    EXPECT_EQ(
        Run("quantize --model " + model_ + " --export gguf --gguf-type F32 --output " + (root_ / "yarn").string()), 2);
    nlohmann::json config;
    std::ifstream(fs::path(model_) / "config.json") >> config;
    config["rope_scaling"]["mscale_all_dim"] = config["rope_scaling"]["mscale"];
    std::ofstream(fs::path(model_) / "config.json") << config.dump(2);
  }
  void TearDown() override { fs::remove_all(root_); }
  int Run(const std::string& args) {
    const std::string log = (root_ / "log.txt").string();
    const int status = std::system((Quark() + " " + args + " > " + log + " 2>&1").c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  fs::path root_;
  std::string model_;
};

TEST_F(DeepseekGgufEstimateTest, DataIsTheWritersByteForByte) {
  absl::StatusOr<ModelShape> model = ReadModelShape(model_);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_NE(model->config.deepseek, nullptr);
  struct Case {
    std::string scheme;  // "" = float weights
    std::string type;
  };
  for (const Case& c : {Case{"", "F32"}, Case{"", "Q8_0"}, Case{"uint4_wo_32", "Q8_0"}, Case{"int4_wo_32", "F32"}}) {
    SCOPED_TRACE(c.scheme + " " + c.type);
    const std::string out = (root_ / ("out_" + c.scheme + c.type)).string();
    ASSERT_EQ(Run("quantize --model " + model_ + " --export gguf" + (c.type.empty() ? "" : " --gguf-type " + c.type) +
                  (c.scheme.empty() ? "" : " --scheme " + c.scheme) + " --output " + out),
              0);
    const Config config = c.scheme.empty() ? Config{} : *PresetConfig(c.scheme);
    GgufArtifactOptions options;
    options.type = c.type;
    absl::StatusOr<GgufSize> size = GgufArtifactSize(*model, BuildLayerPlan(config, model->modules), options);
    ASSERT_TRUE(size.ok()) << size.status();
    auto file = exporter::gguf::GgufFile::Open(out + "/model.gguf");
    ASSERT_TRUE(file.ok()) << file.status();
    const uint64_t measured = fs::file_size(out + "/model.gguf");
    EXPECT_EQ(size->data_bytes, measured - (*file)->data_offset());
    EXPECT_NEAR(static_cast<double>(size->data_bytes + size->header_bytes) / static_cast<double>(measured), 1.0, 0.05);
  }
  // The exporter's refusals: a K-quant mixture, an importance matrix.
  GgufArtifactOptions kquant;
  kquant.type = "Q4_K_M";
  const auto refused = GgufArtifactSize(*model, BuildLayerPlan(Config{}, model->modules), kquant);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("gguf_type: \"Q4_K_M\" is not supported for deepseek_v3 (F32 or Q8_0)"),
            std::string::npos)
      << refused.status();
  EXPECT_NE(
      Run("quantize --model " + model_ + " --export gguf --gguf-type Q4_K_M --output " + (root_ / "out_q4km").string()),
      0);
  GgufArtifactOptions imatrix;
  imatrix.imatrix = true;
  EXPECT_NE(GgufArtifactSize(*model, BuildLayerPlan(Config{}, model->modules), imatrix)
                .status()
                .message()
                .find("gguf_imatrix:"),
            std::string::npos);
}

// The released 671B config (no weights here): every routed expert stacked per layer, the MTP layer left out. Q8_0 is
// 34/32 bytes a weight for the 2-D/3-D weights, F32 4; the two files' data sizes are in that ratio up to the F32
// tensors (norms, routers, biases) they share.
TEST(DeepseekGgufEstimateShapeTest, TheReleasedShapeIsSizedWithoutAFolder) {
  auto released = runtime::DeepseekSyntheticConfig("deepseek-v3", "bfloat16");
  ASSERT_TRUE(released.ok()) << released.status();
  const ModelShape shape = DeepseekModelShape(*released, checkpoint::StDType::kBF16);
  GgufArtifactOptions q8;
  q8.type = "Q8_0";
  auto q8_size = GgufArtifactSize(shape, BuildLayerPlan(Config{}, shape.modules), q8);
  auto f32_size = GgufArtifactSize(shape, BuildLayerPlan(Config{}, shape.modules), GgufArtifactOptions{});
  ASSERT_TRUE(q8_size.ok()) << q8_size.status();
  ASSERT_TRUE(f32_size.ok()) << f32_size.status();
  const double ratio = static_cast<double>(q8_size->data_bytes) / static_cast<double>(f32_size->data_bytes);
  EXPECT_NEAR(ratio, 34.0 / 32 / 4, 0.001) << q8_size->data_bytes << " / " << f32_size->data_bytes;
  std::cout << "deepseek-v3 671B deepseek2 GGUF data: Q8_0 " << q8_size->data_bytes << " B, F32 "
            << f32_size->data_bytes << " B\n";
}

}  // namespace
}  // namespace quark::estimate
