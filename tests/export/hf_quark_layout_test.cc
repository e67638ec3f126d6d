// Each export scheme's tensor names, dtypes and shapes (checkpoint-format.md), and the consumer-rule checker on
// broken quantization_config dicts.
#include "core/export/hf_quark_layout.h"

#include <gtest/gtest.h>

#include "core/config/presets.h"
#include "core/config/quark_json.h"
#include "core/export/hf_quark_checker.h"

namespace quark::exporter {
namespace {

using checkpoint::StDType;

struct Expected {
  std::string suffix;
  StDType dtype;
  std::vector<int64_t> shape;
};

void ExpectTensors(const std::string& preset, const std::vector<Expected>& expected, int64_t out = 64, int64_t in = 128) {
  auto config = PresetConfig(preset);
  ASSERT_TRUE(config.ok());
  auto specs = QuantizedLinearTensors("m", config->global_quant_config, out, in, false, StDType::kBF16, StDType::kBF16);
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), expected.size()) << preset;
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ((*specs)[i].name, "m." + expected[i].suffix) << preset;
    EXPECT_EQ((*specs)[i].dtypes[0], expected[i].dtype) << preset << " " << expected[i].suffix;
    EXPECT_EQ((*specs)[i].shape, expected[i].shape) << preset << " " << expected[i].suffix;
  }
}

TEST(HfQuarkLayoutTest, TensorsPerScheme) {
  ExpectTensors("fp8", {{"weight", StDType::kF8E4M3, {64, 128}}, {"weight_scale", StDType::kF32, {}},
                        {"input_scale", StDType::kF32, {}}});
  ExpectTensors("ptpc_fp8", {{"weight", StDType::kF8E4M3, {64, 128}}, {"weight_scale", StDType::kF32, {64}}});
  ExpectTensors("int8", {{"weight", StDType::kI8, {64, 128}}, {"weight_scale", StDType::kF32, {}},
                         {"weight_zero_point", StDType::kI8, {}}, {"input_scale", StDType::kF32, {1}},
                         {"input_zero_point", StDType::kI8, {1}}});
  ExpectTensors("w_int8_per_channel_a_int8_per_token_dynamic",
                {{"weight", StDType::kI8, {64, 128}}, {"weight_scale", StDType::kF32, {64}},
                 {"weight_zero_point", StDType::kI8, {64}}});
  ExpectTensors("uint4_wo_32", {{"weight", StDType::kI32, {128, 8}}, {"weight_scale", StDType::kBF16, {4, 64}},
                                {"weight_zero_point", StDType::kI32, {4, 8}}});
  ExpectTensors("int4_wo_64", {{"weight", StDType::kI32, {128, 8}}, {"weight_scale", StDType::kBF16, {2, 64}},
                               {"weight_zero_point", StDType::kI32, {2, 8}}});
  ExpectTensors("mxfp4", {{"weight", StDType::kU8, {64, 64}}, {"weight_scale", StDType::kU8, {64, 4}}});
  ExpectTensors("mxfp6_e2m3", {{"weight", StDType::kU8, {64, 96}}, {"weight_scale", StDType::kU8, {64, 4}}});
  ExpectTensors("bfloat16", {{"weight", StDType::kBF16, {64, 128}}});
  // FP8 128x128 blocks: the scale is [out / 128, in / 128] (vLLM's BlockQuantScaleParameter); dynamic input.
  ExpectTensors("fp8_block", {{"weight", StDType::kF8E4M3, {256, 384}}, {"weight_scale", StDType::kF32, {2, 3}}}, 256,
                384);
  // NVFP4: fp4 pairs per byte, F8_E4M3 block scales of 16, F32 scalar global scales (weight and calibrated input).
  ExpectTensors("nvfp4", {{"weight", StDType::kU8, {64, 64}}, {"weight_scale", StDType::kF8E4M3, {64, 8}},
                          {"weight_scale_2", StDType::kF32, {}}, {"input_scale_2", StDType::kF32, {}}});
  // A 172-wide input: MX pads its last block, fp4 packs two per byte.
  ExpectTensors("mxfp4_weight_only", {{"weight", StDType::kU8, {64, 86}}, {"weight_scale", StDType::kU8, {64, 6}}}, 64, 172);
}

TEST(HfQuarkLayoutTest, UnpackableShapesNameTheModuleAndDimension) {
  auto config = PresetConfig("int4_wo_per_channel");
  auto specs = QuantizedLinearTensors("model.layers.0.mlp.down_proj", config->global_quant_config, 64, 172, false,
                                      StDType::kF32, StDType::kF32);
  ASSERT_FALSE(specs.ok());
  EXPECT_NE(std::string(specs.status().message()).find("model.layers.0.mlp.down_proj.weight"), std::string::npos);
  EXPECT_NE(std::string(specs.status().message()).find("172"), std::string::npos);
}

nlohmann::ordered_json ExportConfig(const char* preset, bool kv) {
  Config config = *PresetConfig(preset);
  if (kv) EXPECT_TRUE(ApplyKvCacheDtype("fp8", config).ok());
  return ConfigToQuarkJson(config);
}

bool Mentions(const std::vector<std::string>& problems, const std::string& text) {
  for (const auto& p : problems) {
    if (p.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(HfQuarkCheckerTest, GoodConfigsPass) {
  for (bool kv : {false, true}) {
    for (const char* preset : {"fp8", "int8", "uint4_wo_128", "mxfp4"}) {
      EXPECT_TRUE(QuantizationConfigProblems(ExportConfig(preset, kv)).empty()) << preset;
    }
  }
}

TEST(HfQuarkCheckerTest, RejectsMissingKeys) {
  for (const char* key : {"exclude", "layer_type_quant_config", "export", "version"}) {
    auto qc = ExportConfig("fp8", false);
    qc.erase(key);
    EXPECT_TRUE(Mentions(QuantizationConfigProblems(qc), key)) << key;
  }
  auto qc = ExportConfig("fp8", false);
  qc["global_quant_config"].erase("bias");
  EXPECT_TRUE(Mentions(QuantizationConfigProblems(qc), "global_quant_config.bias: missing"));
  qc = ExportConfig("fp8", false);
  qc["global_quant_config"]["weight"].erase("qscheme");
  EXPECT_TRUE(Mentions(QuantizationConfigProblems(qc), "global_quant_config.weight.qscheme"));
  qc = ExportConfig("fp8", false);
  qc["export"].erase("min_kv_scale");
  EXPECT_TRUE(Mentions(QuantizationConfigProblems(qc), "export.min_kv_scale"));
}

TEST(HfQuarkCheckerTest, RejectsGlobInExclude) {
  auto qc = ExportConfig("fp8", false);
  qc["exclude"] = {"lm_head", "*.mlp.down_proj"};
  EXPECT_TRUE(Mentions(QuantizationConfigProblems(qc), "exclude[1]"));
  qc["exclude"] = {"lm_head", "re:.*down_proj"};
  EXPECT_TRUE(QuantizationConfigProblems(qc).empty());
}

TEST(HfQuarkCheckerTest, RejectsOutputAndBiasOutsideTheKvCache) {
  auto qc = ExportConfig("fp8", false);
  qc["global_quant_config"]["output_tensors"] = qc["global_quant_config"]["input_tensors"];
  EXPECT_TRUE(Mentions(QuantizationConfigProblems(qc), "global_quant_config.output_tensors"));
  qc = ExportConfig("fp8", false);
  qc["global_quant_config"]["bias"] = qc["global_quant_config"]["weight"];
  EXPECT_TRUE(Mentions(QuantizationConfigProblems(qc), "global_quant_config.bias"));
  qc = ExportConfig("fp8", true);
  qc["export"]["kv_cache_group"] = {"*k_proj", "*v_proj", "*o_proj"};
  EXPECT_TRUE(Mentions(QuantizationConfigProblems(qc), "*o_proj"));
}

TEST(HfQuarkCheckerTest, RejectsUnequalFusedConfigs) {
  checkpoint::ModelConfig model;
  model.family = checkpoint::ArchFamily::kLlama;
  model.num_hidden_layers = 2;
  auto qc = ExportConfig("fp8", true);
  EXPECT_TRUE(FusedLayerProblems(qc, model).empty());  // KV outputs are stripped as vLLM strips them
  auto int8 = ExportConfig("int8", false);
  qc["layer_quant_config"]["*up_proj"] = int8["global_quant_config"];
  const auto problems = FusedLayerProblems(qc, model);
  EXPECT_TRUE(Mentions(problems, "model.layers.0.mlp.up_proj")) << problems.size();
  qc = ExportConfig("fp8", false);
  qc["exclude"] = {"lm_head", "model.layers.1.self_attn.k_proj"};
  EXPECT_TRUE(Mentions(FusedLayerProblems(qc, model), "model.layers.1.self_attn.k_proj: excluded differently"));
}

}  // namespace
}  // namespace quark::exporter
