// compressed-tensors' quantization_config for each preset it can carry (format, strategy, group sizes, dynamic,
// targets, ignore, kv_cache_scheme), and the schemes it cannot carry refused naming the field.
#include "core/export/ct_config.h"

#include <gtest/gtest.h>

#include "core/config/presets.h"

namespace quark::exporter {
namespace {

using Json = nlohmann::json;

LayerPlan PlanOf(const Config& config) {
  return BuildLayerPlan(config, {{"model.layers.0.self_attn.q_proj", "Linear", {256, 256}},
                                 {"model.layers.0.mlp.down_proj", "Linear", {256, 512}},
                                 {"lm_head", "Linear", {1000, 256}}});
}

absl::StatusOr<Json> ConfigFor(const std::string& preset, const std::string& kv = "") {
  Config c = *PresetConfig(preset);
  if (auto s = ApplyKvCacheDtype(kv, c); !s.ok()) return s;
  return CompressedTensorsConfig(c, PlanOf(c));
}

TEST(CtConfigTest, FormatsAndArgumentsPerPreset) {
  struct Case {
    const char* preset;
    const char* format;
    const char* weight_strategy;
    Json group_size;
    const char* input_strategy;  // "" = weight only
  };
  for (const Case& c : {Case{"int4_wo_128", "pack-quantized", "group", 128, ""},
                        Case{"uint4_wo_per_channel", "pack-quantized", "channel", nullptr, ""},
                        Case{"int8", "int-quantized", "tensor", nullptr, "tensor"},
                        Case{"fp8", "float-quantized", "tensor", nullptr, "tensor"},
                        Case{"ptpc_fp8", "float-quantized", "channel", nullptr, "token"},
                        Case{"fp8_block", "float-quantized", "block", nullptr, "group"},
                        Case{"nvfp4", "nvfp4-pack-quantized", "tensor_group", 16, "tensor_group"},
                        Case{"nvfp4_weight_only", "nvfp4-pack-quantized", "tensor_group", 16, ""},
                        Case{"mxfp4", "mxfp4-pack-quantized", "group", 32, "group"}}) {
    auto qc = ConfigFor(c.preset);
    ASSERT_TRUE(qc.ok()) << c.preset << ": " << qc.status();
    EXPECT_EQ((*qc)["quant_method"], "compressed-tensors");
    EXPECT_EQ((*qc)["quantization_status"], "compressed");
    EXPECT_EQ((*qc)["format"], c.format) << c.preset;
    EXPECT_EQ((*qc)["ignore"], Json({"lm_head"}));
    const Json& g = (*qc)["config_groups"]["group_0"];
    EXPECT_EQ(g["targets"], Json({"Linear"}));
    EXPECT_EQ(g["format"], c.format);
    EXPECT_EQ(g["weights"]["strategy"], c.weight_strategy) << c.preset;
    EXPECT_EQ(g["weights"]["group_size"], c.group_size) << c.preset;
    if (*c.input_strategy) {
      EXPECT_EQ(g["input_activations"]["strategy"], c.input_strategy) << c.preset;
    } else {
      EXPECT_TRUE(g["input_activations"].is_null()) << c.preset;
    }
  }
  const Json block = (*ConfigFor("fp8_block"))["config_groups"]["group_0"];
  EXPECT_EQ(block["weights"]["block_structure"], Json({128, 128}));
  EXPECT_EQ(block["input_activations"]["group_size"], 128);
  EXPECT_EQ(block["input_activations"]["dynamic"], true);
  const Json nvfp4 = (*ConfigFor("nvfp4"))["config_groups"]["group_0"];
  EXPECT_EQ(nvfp4["input_activations"]["dynamic"], "local");
  EXPECT_EQ(nvfp4["weights"]["type"], "float");
  EXPECT_EQ(nvfp4["weights"]["num_bits"], 4);
  const Json uint4 = (*ConfigFor("uint4_wo_128"))["config_groups"]["group_0"]["weights"];
  EXPECT_EQ(uint4["symmetric"], false);
  EXPECT_EQ(uint4["num_bits"], 4);
}

TEST(CtConfigTest, KvCacheSchemeIsFp8PerTensor) {
  auto qc = ConfigFor("fp8", "fp8");
  ASSERT_TRUE(qc.ok()) << qc.status();
  EXPECT_EQ((*qc)["kv_cache_scheme"]["type"], "float");
  EXPECT_EQ((*qc)["kv_cache_scheme"]["strategy"], "tensor");
  // The k/v projections carry the same weights and inputs: still one group.
  EXPECT_EQ((*qc)["config_groups"].size(), 1u);
  auto int8_kv = ConfigFor("fp8", "int8");
  ASSERT_FALSE(int8_kv.ok());
  EXPECT_NE(int8_kv.status().message().find("kv_cache_dtype"), std::string::npos);
}

TEST(CtConfigTest, SchemesItCannotExpressAreRefusedNamingTheField) {
  for (auto [preset, field] : {std::pair{"mxfp6_e3m2", "global_quant_config.weight.dtype"},
                               std::pair{"bfloat16", "global_quant_config.weight.dtype"},
                               std::pair{"mxint8", "global_quant_config.weight.dtype"},
                               std::pair{"int4_fp8", "global_quant_config.weight.fp8_first_stage"}}) {
    auto qc = ConfigFor(preset);
    ASSERT_FALSE(qc.ok()) << preset;
    EXPECT_NE(qc.status().message().find(field), std::string::npos) << qc.status();
  }
  Config c = *PresetConfig("int8");
  c.global_quant_config.weight->round_method = RoundMethod::kFloor;
  auto qc = CompressedTensorsConfig(c, PlanOf(c));
  ASSERT_FALSE(qc.ok());
  EXPECT_NE(qc.status().message().find("global_quant_config.weight.round_method"), std::string::npos) << qc.status();
}

TEST(CtConfigTest, DistinctLayerConfigsTargetTheirModules) {
  Config c = *PresetConfig("int4_wo_128");
  c.layer_quant_config.push_back({"*down_proj", PresetConfig("int8")->global_quant_config});
  auto qc = CompressedTensorsConfig(c, PlanOf(c));
  ASSERT_TRUE(qc.ok()) << qc.status();
  EXPECT_EQ((*qc)["format"], "mixed-precision");
  EXPECT_EQ((*qc)["config_groups"]["group_0"]["targets"], Json({"model.layers.0.self_attn.q_proj"}));
  EXPECT_EQ((*qc)["config_groups"]["group_1"]["targets"], Json({"model.layers.0.mlp.down_proj"}));
  EXPECT_EQ((*qc)["config_groups"]["group_1"]["format"], "int-quantized");
}

}  // namespace
}  // namespace quark::exporter
