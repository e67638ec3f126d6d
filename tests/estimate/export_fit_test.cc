// #36: the exporters' packing rules checked from a model's shapes alone (core/estimate/export_fit.h), as quarkd
// checks a job at submit: on stories260K (hidden 64, intermediate 172) each rule names the module, its shape and why.
#include "core/estimate/export_fit.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "core/config/presets.h"

namespace quark::estimate {
namespace {

class ExportFitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* shared = std::getenv("QUARK_SHARED_DIR");
    ASSERT_NE(shared, nullptr);
    absl::StatusOr<ModelShape> shape = ReadModelShape(std::string(shared) + "/fixtures/stories260K");
    ASSERT_TRUE(shape.ok()) << shape.status();
    shape_ = *std::move(shape);
  }

  absl::Status Fit(const Config& config, std::vector<ExportKind> kinds) {
    return CheckExportFit(shape_, BuildLayerPlan(config, shape_.modules), kinds);
  }

  static Config Preset(const char* name) {
    absl::StatusOr<Config> config = PresetConfig(name);
    EXPECT_TRUE(config.ok()) << config.status();
    return config.ok() ? *config : Config();
  }

  ModelShape shape_;
};

TEST_F(ExportFitTest, Int4PerChannelPacksEightCodesAlongTheInputColumns) {
  const absl::Status s = Fit(Preset("uint4_wo_per_channel"), {ExportKind::kHfQuark});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  // #30: the zero points pack 8 a word too (as Quark packs them), so gate_proj's 172 output channels fail first.
  EXPECT_EQ(s.message(),
            "hf_quark: model.layers.0.mlp.gate_proj (weight [172, 64], global_quant_config): "
            "model.layers.0.mlp.gate_proj.weight: uint4 packs 8 values per word, but the channel count "
            "(weight_zero_point packs 8 a word) = 172 is not a multiple of 8");
  // compressed-tensors packs with spill (any shape): not refused here.
  EXPECT_TRUE(Fit(Preset("uint4_wo_per_channel"), {ExportKind::kCompressedTensors}).ok());
  // Eight-bit codes pack nothing.
  EXPECT_TRUE(Fit(Preset("w_int8_per_tensor_sym"), {ExportKind::kHfQuark}).ok());
}

TEST_F(ExportFitTest, PerGroupInt4PacksTheTransposedWeightAlongTheOutputRows) {
  // Groups of 4 divide both 64 and 172 columns; the stored [in, out] codes pack along out: gate_proj's 172 rows fail.
  Config config = Preset("int4_wo_32");
  config.global_quant_config.weight->group_size = 4;
  const absl::Status s = Fit(config, {ExportKind::kHfQuark});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("hf_quark: model.layers.0.mlp.gate_proj (weight [172, 64]"), std::string::npos) << s;
  EXPECT_NE(s.message().find("out_features (per_group int4 packs the transposed weight) = 172 is not a multiple of 8"),
            std::string::npos)
      << s;
}

TEST_F(ExportFitTest, GgufHoldsEngineCodesOnlyInGroupsOfThirtyTwoAndExcludedLinearsAreNotChecked) {
  const absl::Status s = Fit(Preset("w_int8_per_tensor_sym"), {ExportKind::kHfQuark, ExportKind::kGguf});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("gguf: model.layers.0.self_attn.q_proj"), std::string::npos) << s;
  EXPECT_NE(s.message().find("cannot be held by GGUF"), std::string::npos) << s;
  // Excluded linears stay float: without the MLPs (gate/up: 172 channels, down: 172 columns) uint4 per channel packs
  // everywhere.
  Config excluded = Preset("uint4_wo_per_channel");
  excluded.exclude.push_back("*.mlp.*");
  EXPECT_TRUE(Fit(excluded, {ExportKind::kHfQuark}).ok());
}

}  // namespace
}  // namespace quark::estimate
