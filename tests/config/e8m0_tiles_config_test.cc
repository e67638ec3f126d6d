// #30 E8M0 tiles in the Config: the mxfp8_2d / fp8_block_e8m0 presets, Quark's JSON spelling (scale_type
// "float8_e8m0fnu" on a per_block fp8 weight) read and written back, and validation naming the field where vLLM's
// steps 0 / 3a would not load the layer (block size, input spec, shapes the tiles do not divide).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/config/e8m0_tiles.h"
#include "core/config/presets.h"
#include "core/config/quark_json.h"
#include "core/config/validation.h"

namespace quark {
namespace {

using ::testing::HasSubstr;
using OrderedJson = nlohmann::ordered_json;

std::string ValidationErrors(const Config& config, const std::vector<ModuleInfo>* modules = nullptr) {
  return std::string(ValidationStatus(ValidateConfig(config, modules)).message());
}

// The layer config of Quark's own test of DeepSeek-V3.1's "ue8m0" checkpoints (amd/Quark 1d27b558,
// test_file2file_quantization.py: _make_quark_source_qc_with_per_layer_e8m0): no scale_format key.
OrderedJson QuarkUe8m0Layer() {
  return OrderedJson::parse(R"({
    "input_tensors": {"ch_axis": -1, "dtype": "fp8_e4m3", "group_size": 128, "block_size": null, "is_dynamic": true,
                      "observer_cls": "PerGroupMinMaxObserver", "qscheme": "per_group", "round_method": "half_even",
                      "scale_type": null, "symmetric": true},
    "output_tensors": null,
    "weight": {"ch_axis": null, "dtype": "fp8_e4m3", "group_size": null, "block_size": [128, 128],
               "is_dynamic": false, "observer_cls": "PerBlock2DMinMaxObserver", "qscheme": "per_block",
               "round_method": "half_even", "scale_type": "float8_e8m0fnu", "symmetric": true},
    "bias": null, "target_device": null})");
}

TEST(E8m0TilesConfigTest, PresetsWriteQuarksSpellingAndReadBackEqual) {
  for (auto [preset, rows, cols] : {std::tuple{"mxfp8_2d", 32, 32}, std::tuple{"fp8_block_e8m0", 128, 128}}) {
    const Config c = *PresetConfig(preset);
    EXPECT_TRUE(ValidationStatus(ValidateConfig(c)).ok()) << preset;
    const OrderedJson j = ConfigToQuarkJson(c);
    const OrderedJson& w = j["global_quant_config"]["weight"];
    EXPECT_EQ(w["dtype"], "fp8_e4m3") << preset;
    EXPECT_EQ(w["qscheme"], "per_block");
    EXPECT_EQ(w["block_size"], OrderedJson::array({rows, cols}));
    EXPECT_EQ(w["scale_type"], "float8_e8m0fnu");
    // Quark's importer decodes the bytes as 2^(b - 127) only under scale_format "e8m0" (#30); vLLM's dispatch does not
    // read the field.
    EXPECT_EQ(w["scale_format"], "e8m0") << preset;
    EXPECT_EQ(w["observer_cls"], "PerBlock2DMinMaxObserver");
    EXPECT_EQ(w["symmetric"], true);
    EXPECT_EQ(w["is_dynamic"], false);
    const OrderedJson& in = j["global_quant_config"]["input_tensors"];
    EXPECT_EQ(in["qscheme"], "per_group");
    EXPECT_EQ(in["group_size"], cols);
    EXPECT_EQ(in["is_dynamic"], true);
    auto back = ConfigFromQuarkJson(j);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, c) << preset;
  }
}

TEST(E8m0TilesConfigTest, QuarksUe8m0LayerReadsAsE8m0Tiles) {
  auto layer = LayerConfigFromQuarkJson(QuarkUe8m0Layer(), "layer_quant_config[model.layers.0.q_proj]");
  ASSERT_TRUE(layer.ok()) << layer.status();
  ASSERT_TRUE(layer->weight);
  EXPECT_TRUE(IsE8m0Tiles(*layer->weight));
  EXPECT_EQ(*E8m0TileFormOf(*layer->weight), E8m0TileForm::kFp8Block);
  EXPECT_EQ(*layer->weight, *PresetConfig("fp8_block_e8m0")->global_quant_config.weight);
  Config c;
  c.global_quant_config = *layer;
  EXPECT_TRUE(ValidationStatus(ValidateConfig(c)).ok()) << ValidationErrors(c);
}

TEST(E8m0TilesConfigTest, E8m0ScaleTypeOffPerBlockIsRefusedNamingTheField) {
  OrderedJson layer = QuarkUe8m0Layer();
  layer["weight"]["qscheme"] = "per_group";
  layer["weight"]["block_size"] = nullptr;
  layer["weight"]["group_size"] = 128;
  auto refused = LayerConfigFromQuarkJson(layer, "global_quant_config");
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("global_quant_config.weight.scale_type"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("per_block"));
}

TEST(E8m0TilesConfigTest, BlockSizesAndInputsVllmCannotLoadAreRefusedNamingTheField) {
  const Config mxfp8 = *PresetConfig("mxfp8_2d");
  {
    Config c = mxfp8;
    c.global_quant_config.weight->block_size = {64, 64};
    EXPECT_THAT(ValidationErrors(c), HasSubstr("global_quant_config.weight.block_size: [64, 64] is neither MXFP8's [R, 32]"));
  }
  {
    Config c = mxfp8;  // R other than 32 is MXFP8 too (vLLM's scale_block_rows)
    c.global_quant_config.weight->block_size = {1, 32};
    EXPECT_TRUE(ValidationStatus(ValidateConfig(c)).ok()) << ValidationErrors(c);
  }
  {
    Config c = mxfp8;
    c.global_quant_config.input_tensors->group_size = 128;
    EXPECT_THAT(ValidationErrors(c), HasSubstr("global_quant_config.input_tensors.group_size: 128 is not the tile's cols 32"));
  }
  {
    Config c = mxfp8;
    c.global_quant_config.input_tensors->is_dynamic = false;
    EXPECT_THAT(ValidationErrors(c), HasSubstr("global_quant_config.input_tensors.is_dynamic"));
  }
  {
    Config c = mxfp8;
    c.global_quant_config.input_tensors.reset();
    EXPECT_THAT(ValidationErrors(c), HasSubstr("global_quant_config.input_tensors: none"));
  }
  {
    // The input vLLM's QuarkW8A8Mxfp8 computes (kMxfp8Dynamic: E8M0 scales per 32) is the preset's; a float-scaled
    // fp8 token group of 32 would be evaluated here as neither vLLM nor Quark's MX observer runs it.
    ASSERT_TRUE(mxfp8.global_quant_config.input_tensors->IsMx());
    Config c = mxfp8;
    c.global_quant_config.input_tensors = PresetConfig("fp8_block")->global_quant_config.input_tensors;
    c.global_quant_config.input_tensors->group_size = 32;
    EXPECT_THAT(ValidationErrors(c), HasSubstr("global_quant_config.input_tensors.dtype: fp8_e4m3 (float scales); vLLM loads "
                                               "E8M0 weight tiles [32, 32] (QuarkW8A8Mxfp8)"));
  }
  {
    // The [128, 128] form is the other way round: QuarkW8A8Fp8PerBlock takes float-scaled token groups of 128.
    Config c = *PresetConfig("fp8_block_e8m0");
    EXPECT_TRUE(ValidationErrors(c).empty()) << ValidationErrors(c);
    c.global_quant_config.input_tensors = PresetConfig("mxfp8")->global_quant_config.input_tensors;
    c.global_quant_config.input_tensors->group_size = 128;
    EXPECT_THAT(ValidationErrors(c), HasSubstr("global_quant_config.input_tensors.dtype: fp8_e4m3 (MX)"));
  }
  {
    Config c = mxfp8;
    c.global_quant_config.weight->dtype = DType::kFp8E5M2;
    EXPECT_THAT(ValidationErrors(c), HasSubstr("global_quant_config.weight.dtype"));
  }
  {
    Config c = mxfp8;
    c.algo_config.push_back(GptqAlgo{});  // GPTQ rounds E8M0 tiles (gptq_formats_test)
    EXPECT_TRUE(ValidationErrors(c).empty()) << ValidationErrors(c);
  }
}

TEST(E8m0TilesConfigTest, ModulesTheTilesDoNotDivideAreRefusedNamingModuleAndRule) {
  const std::vector<ModuleInfo> modules = {{"model.layers.0.self_attn.q_proj", "Linear", {64, 64}},
                                           {"model.layers.0.mlp.down_proj", "Linear", {64, 48}}};
  EXPECT_THAT(ValidationErrors(*PresetConfig("mxfp8_2d"), &modules),
              HasSubstr("global_quant_config.weight.block_size: [32, 32] does not tile model.layers.0.mlp.down_proj "
                        "(weight [64, 48]; rule: out_features % 32 == 0 and in_features % 32 == 0)"));
}

}  // namespace
}  // namespace quark
