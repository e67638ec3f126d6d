#include "core/config/presets.h"

#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/config/validation.h"

namespace quark {
namespace {

using ::testing::HasSubstr;

TEST(PresetsTest, EverySchemeOfQuarksLlmExampleIsThere) {
  std::set<std::string> names;
  for (const auto& p : AllPresets()) names.insert(p.name);
  for (const char* name :
       {"int8", "fp8", "ptpc_fp8", "int4_wo_32", "int4_wo_64", "int4_wo_128", "int4_wo_per_channel", "uint4_wo_32",
        "uint4_wo_64", "uint4_wo_128", "uint4_wo_per_channel", "int4_wa_64", "mxfp4", "mxfp4_weight_only",
        "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4_mxfp6_e2m3", "mxfp4_fp8", "w_int8_a_int8_per_tensor_sym",
        "w_int8_per_channel_a_int8_per_tensor_sym", "w_int8_per_channel_a_int8_per_token_dynamic", "w_fp8_a_fp8",
        "w_uint4_per_group_asym", "w_mxfp4_a_mxfp4"}) {
    EXPECT_TRUE(names.count(name)) << name;
  }
}

TEST(PresetsTest, NamesAreUniqueAndDescribed) {
  std::set<std::string> names;
  for (const auto& p : AllPresets()) {
    EXPECT_TRUE(names.insert(p.name).second) << "duplicate " << p.name;
    EXPECT_FALSE(p.description.empty()) << p.name;
  }
}

TEST(PresetsTest, EveryPresetIsValidAndExcludesLmHead) {
  for (const auto& p : AllPresets()) {
    const auto issues = ValidateConfig(p.config);
    EXPECT_TRUE(ValidationStatus(issues).ok()) << p.name << ": " << ValidationStatus(issues);
    EXPECT_EQ(p.config.exclude, std::vector<std::string>{"lm_head"}) << p.name;
  }
}

TEST(PresetsTest, SchemesHaveTheirShapes) {
  const Config uint4 = *PresetConfig("uint4_wo_128");
  ASSERT_TRUE(uint4.global_quant_config.weight);
  EXPECT_EQ(uint4.global_quant_config.weight->dtype, DType::kUInt4);
  EXPECT_EQ(uint4.global_quant_config.weight->qscheme, QScheme::kPerGroup);
  EXPECT_EQ(uint4.global_quant_config.weight->group_size, 128);
  EXPECT_FALSE(uint4.global_quant_config.weight->symmetric);
  EXPECT_FALSE(uint4.global_quant_config.input_tensors);

  const Config ptpc = *PresetConfig("ptpc_fp8");
  ASSERT_TRUE(ptpc.global_quant_config.input_tensors);
  EXPECT_TRUE(ptpc.global_quant_config.input_tensors->is_dynamic);
  EXPECT_EQ(ptpc.global_quant_config.weight->qscheme, QScheme::kPerChannel);

  const Config mx = *PresetConfig("mxfp4");
  EXPECT_TRUE(mx.global_quant_config.weight->IsMx());
  EXPECT_EQ(mx.global_quant_config.weight->group_size, 32);
  EXPECT_EQ(mx.global_quant_config.weight->scale_format, ScaleFormat::kE8M0);
}

TEST(PresetsTest, LegacyNamesEqualTheirCurrentSchemes) {
  EXPECT_EQ(*PresetConfig("w_fp8_a_fp8"), *PresetConfig("fp8"));
  EXPECT_EQ(*PresetConfig("w_int8_a_int8_per_tensor_sym"), *PresetConfig("int8"));
  EXPECT_EQ(*PresetConfig("w_uint4_per_group_asym"), *PresetConfig("uint4_wo_128"));
  EXPECT_EQ(*PresetConfig("w_mxfp4_a_mxfp4"), *PresetConfig("mxfp4"));
}

TEST(PresetsTest, UnknownPresetIsNotFoundWithSuggestions) {
  auto config = PresetConfig("fp9");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(config.status().message()), HasSubstr("preset: unknown scheme \"fp9\""));
  EXPECT_THAT(std::string(config.status().message()), HasSubstr("fp8"));
}

TEST(PresetsTest, KvCacheFp8AddsKAndVPatterns) {
  Config config = *PresetConfig("fp8");
  ASSERT_TRUE(ApplyKvCacheDtype("fp8", config).ok());
  ASSERT_EQ(config.kv_cache_quant_config.size(), 2u);
  EXPECT_EQ(config.kv_cache_quant_config[0].pattern, "*k_proj");
  EXPECT_EQ(config.kv_cache_quant_config[1].pattern, "*v_proj");
  for (const auto& entry : config.kv_cache_quant_config) {
    ASSERT_TRUE(entry.config.output_tensors);
    EXPECT_EQ(entry.config.output_tensors->dtype, DType::kFp8E4M3);
    EXPECT_EQ(entry.config.output_tensors->qscheme, QScheme::kPerTensor);
    // The rest of the layer keeps the global config, as vLLM's fused qkv_proj expects.
    EXPECT_EQ(entry.config.weight, config.global_quant_config.weight);
  }
  EXPECT_EQ(config.layer_quant_config.size(), 2u);
  EXPECT_TRUE(ValidationStatus(ValidateConfig(config)).ok());
}

TEST(PresetsTest, KvCacheInt8AndNone) {
  Config config = *PresetConfig("int4_wo_128");
  ASSERT_TRUE(ApplyKvCacheDtype("", config).ok());
  EXPECT_TRUE(config.kv_cache_quant_config.empty());
  ASSERT_TRUE(ApplyKvCacheDtype("int8", config).ok());
  EXPECT_EQ(config.kv_cache_quant_config[0].config.output_tensors->dtype, DType::kInt8);
}

TEST(PresetsTest, UnknownKvCacheDtypeNamesTheField) {
  Config config = *PresetConfig("fp8");
  auto status = ApplyKvCacheDtype("fp16", config);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("kv_cache_dtype: unknown \"fp16\""));
}

}  // namespace
}  // namespace quark
