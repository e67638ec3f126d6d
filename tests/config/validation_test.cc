// One test per validation rule, each asserting the message and the field path it names.
#include "core/config/validation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/config/config_json.h"
#include "core/config/presets.h"

namespace quark {
namespace {

using ::testing::HasSubstr;

std::string Errors(const Config& config, const std::vector<ModuleInfo>* modules = nullptr) {
  return std::string(ValidationStatus(ValidateConfig(config, modules)).message());
}

std::string Warnings(const Config& config, const std::vector<ModuleInfo>* modules = nullptr) {
  std::string out;
  for (const auto& issue : ValidateConfig(config, modules)) {
    if (issue.severity == ValidationIssue::Severity::kWarning) out += issue.ToString() + "\n";
  }
  return out;
}

Config Uint4Group(int group) {
  Config c = *PresetConfig("uint4_wo_128");
  c.global_quant_config.weight->group_size = group;
  return c;
}

// A Llama-shaped module list: 4096 hidden, 11008 MLP.
std::vector<ModuleInfo> LlamaModules() {
  std::vector<ModuleInfo> m;
  m.push_back({"model.embed_tokens", "Embedding", {32000, 4096}});
  for (int i = 0; i < 2; ++i) {
    const std::string p = "model.layers." + std::to_string(i);
    for (const char* proj : {"q_proj", "k_proj", "v_proj", "o_proj"}) {
      m.push_back({p + ".self_attn." + proj, "Linear", {4096, 4096}});
    }
    m.push_back({p + ".mlp.gate_proj", "Linear", {11008, 4096}});
    m.push_back({p + ".mlp.up_proj", "Linear", {11008, 4096}});
    m.push_back({p + ".mlp.down_proj", "Linear", {4096, 11008}});
  }
  m.push_back({"lm_head", "Linear", {32000, 4096}});
  return m;
}

TEST(ValidationTest, ValidConfigHasNoIssues) {
  const auto modules = LlamaModules();
  EXPECT_TRUE(ValidateConfig(*PresetConfig("uint4_wo_128"), &modules).empty());
}

TEST(ValidationTest, PerGroupWithoutGroupSize) {
  Config c = *PresetConfig("uint4_wo_128");
  c.global_quant_config.weight->group_size.reset();
  EXPECT_THAT(Errors(c), HasSubstr("global_quant_config.weight.group_size: required when qscheme is per_group"));
}

TEST(ValidationTest, GroupSizeZeroOrNegative) {
  EXPECT_THAT(Errors(Uint4Group(0)), HasSubstr("global_quant_config.weight.group_size: must be positive or -1"));
  EXPECT_TRUE(ValidationStatus(ValidateConfig(Uint4Group(-1))).ok());  // -1 = the whole row
}

TEST(ValidationTest, GroupSizeThatDoesNotDivideNamesTheModule) {
  const auto modules = LlamaModules();
  EXPECT_THAT(Errors(Uint4Group(100), &modules),
              HasSubstr("global_quant_config.weight.group_size: 100 does not divide in_features 4096 of "
                        "model.layers.0.self_attn.q_proj"));
  // 11008 = 2^8 * 43: group 256 divides 4096 but not the down_proj's 11008.
  EXPECT_THAT(Errors(Uint4Group(512), &modules),
              HasSubstr("group_size: 512 does not divide in_features 11008 of model.layers.0.mlp.down_proj"));
}

TEST(ValidationTest, GroupSizeRuleFollowsLayerPatterns) {
  Config c = *PresetConfig("uint4_wo_128");
  LayerQuantConfig down = c.global_quant_config;
  down.weight->group_size = 96;
  c.layer_quant_config.push_back({"*.down_proj", down});
  const auto modules = LlamaModules();
  EXPECT_THAT(Errors(c, &modules),
              HasSubstr("layer_quant_config[*.down_proj].weight.group_size: 96 does not divide in_features 11008"));
}

TEST(ValidationTest, DynamicWeights) {
  Config c = *PresetConfig("int8");
  c.global_quant_config.weight->is_dynamic = true;
  EXPECT_THAT(Errors(c), HasSubstr("global_quant_config.weight.is_dynamic: weights and biases cannot be dynamic"));
}

TEST(ValidationTest, MxWithoutGroup32) {
  Config c = *PresetConfig("mxfp4");
  c.global_quant_config.weight->group_size = 64;
  EXPECT_THAT(Errors(c), HasSubstr("global_quant_config.weight.group_size: OCP MX needs group_size 32, got 64"));
}

TEST(ValidationTest, MxLegacyWithoutElementType) {
  Config c = *PresetConfig("mxfp4");
  c.global_quant_config.weight->dtype = DType::kMx;
  EXPECT_THAT(Errors(c), HasSubstr("global_quant_config.weight.mx_element_dtype: required when dtype is mx"));
}

TEST(ValidationTest, MxWithAnElementTypeMxHasNot) {
  Config c = *PresetConfig("mxfp4");
  c.global_quant_config.weight->dtype = DType::kUInt4;
  EXPECT_THAT(Errors(c), HasSubstr("global_quant_config.weight.dtype: OCP MX (scale_format e8m0) needs an element type"));
}

TEST(ValidationTest, UnknownDtype) {
  // The engine's enums cannot hold an unknown dtype, so the rule lives where a Config is read.
  auto config = ConfigFromAnyJson(R"({"global_quant_config": {"weight": {"dtype": "int5", "qscheme": "per_tensor"}}})");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(std::string(config.status().message()),
              HasSubstr("global_quant_config.weight.dtype: unknown value \"int5\" (one of: int8, uint8"));
}

TEST(ValidationTest, PercentileObserverWithPerChannel) {
  Config c = *PresetConfig("w_int8_per_channel_a_int8_per_tensor_sym");
  c.global_quant_config.weight->observer = ObserverKind::kPercentile;
  EXPECT_THAT(Errors(c),
              HasSubstr("global_quant_config.weight.observer: percentile supports per_tensor only (qscheme is per_channel)"));
}

TEST(ValidationTest, MseObserverWithPerGroup) {
  Config c = *PresetConfig("uint4_wo_128");
  c.global_quant_config.weight->observer = ObserverKind::kMse;
  EXPECT_THAT(Errors(c), HasSubstr("global_quant_config.weight.observer: mse supports per_tensor only"));
}

TEST(ValidationTest, HistogramObserverOnADynamicSpec) {
  Config c = *PresetConfig("w_int8_a_int8_per_tensor_sym_dynamic");
  c.global_quant_config.input_tensors->observer = ObserverKind::kPercentile;
  EXPECT_THAT(Errors(c), HasSubstr("global_quant_config.input_tensors.observer: percentile is a calibration observer"));
}

TEST(ValidationTest, PercentileOutOfRange) {
  Config c = *PresetConfig("int8");
  c.global_quant_config.input_tensors->observer = ObserverKind::kPercentile;
  c.global_quant_config.input_tensors->percentile = 120;
  EXPECT_THAT(Errors(c), HasSubstr("global_quant_config.input_tensors.percentile: must be in (0, 100], got 120"));
}

TEST(ValidationTest, MxObserverOnANonMxSpec) {
  Config c = *PresetConfig("int8");
  c.global_quant_config.weight->observer = ObserverKind::kMxBlock;
  EXPECT_THAT(Errors(c), HasSubstr("global_quant_config.weight.observer: mx_block needs an OCP MX spec"));
}

TEST(ValidationTest, Pof2ScalesOnlyForInt8) {
  Config c = *PresetConfig("int4_wo_128");
  c.global_quant_config.weight->scale_type = ScaleType::kPof2;
  EXPECT_THAT(Errors(c), HasSubstr("global_quant_config.weight.scale_type: pof2 scales need int8 or uint8, got int4"));
}

TEST(ValidationTest, AsymmetricFloatFormat) {
  Config c = *PresetConfig("fp8");
  c.global_quant_config.weight->symmetric = false;
  EXPECT_THAT(Errors(c), HasSubstr("global_quant_config.weight.symmetric: fp8_e4m3 is symmetric only"));
}

TEST(ValidationTest, FloatZeroPointOnAFloatFormat) {
  Config c = *PresetConfig("fp8");
  c.global_quant_config.weight->zero_point_type = ZeroPointType::kFloat32;
  EXPECT_THAT(Errors(c), HasSubstr("global_quant_config.weight.zero_point_type: float32 zero points need an integer"));
}

TEST(ValidationTest, MxElementTypeWithoutMx) {
  Config c = *PresetConfig("int8");
  c.global_quant_config.weight->mx_element_dtype = DType::kFp4;
  EXPECT_THAT(Errors(c), HasSubstr("global_quant_config.weight.mx_element_dtype: only used with dtype mx"));
}

TEST(ValidationTest, GroupSizeOnPerChannelIsAWarning) {
  Config c = *PresetConfig("w_int8_per_channel_a_int8_per_tensor_sym");
  c.global_quant_config.weight->group_size = 128;
  EXPECT_TRUE(ValidationStatus(ValidateConfig(c)).ok());
  EXPECT_THAT(Warnings(c), HasSubstr("global_quant_config.weight.group_size: ignored"));
}

TEST(ValidationTest, ChannelAxisOutOfRange) {
  Config c = *PresetConfig("w_int8_per_channel_a_int8_per_tensor_sym");
  c.global_quant_config.weight->ch_axis = 7;
  EXPECT_THAT(Errors(c), HasSubstr("global_quant_config.weight.ch_axis: out of range: 7"));
}

TEST(ValidationTest, UnknownModuleType) {
  Config c = *PresetConfig("int8");
  c.layer_type_quant_config["Lineer"] = c.global_quant_config;
  EXPECT_THAT(Errors(c), HasSubstr("layer_type_quant_config[Lineer]: unknown module type"));
}

TEST(ValidationTest, EmptyPatterns) {
  Config c = *PresetConfig("int8");
  c.exclude.push_back("");
  EXPECT_THAT(Errors(c), HasSubstr("exclude[1]: empty pattern"));
  c = *PresetConfig("int8");
  c.layer_quant_config.push_back({"", c.global_quant_config});
  EXPECT_THAT(Errors(c), HasSubstr("layer_quant_config: an entry has an empty pattern"));
}

TEST(ValidationTest, ConfigThatQuantizesNothing) {
  EXPECT_THAT(Errors(Config{}), HasSubstr("global_quant_config: the config quantizes no tensor at all"));
}

TEST(ValidationTest, KvCacheNeedsAStaticPerTensorFp8OrInt8Output) {
  Config c = *PresetConfig("fp8");
  ASSERT_TRUE(ApplyKvCacheDtype("fp8", c).ok());
  c.kv_cache_quant_config[0].config.output_tensors->dtype = DType::kFp4;
  c.kv_cache_quant_config[1].config.output_tensors->is_dynamic = true;
  const std::string errors = Errors(c);
  EXPECT_THAT(errors, HasSubstr("kv_cache_quant_config[*k_proj].output_tensors.dtype: KV cache supports fp8_e4m3 or "
                                "int8, got fp4"));
  EXPECT_THAT(errors, HasSubstr("kv_cache_quant_config[*v_proj].output_tensors.is_dynamic: KV-cache scales are static"));
  c.kv_cache_quant_config[0].config.output_tensors.reset();
  EXPECT_THAT(Errors(c), HasSubstr("kv_cache_quant_config[*k_proj].output_tensors: required"));
}

TEST(ValidationTest, NegativeMinKvScale) {
  Config c = *PresetConfig("fp8");
  c.min_kv_scale = -1;
  EXPECT_THAT(Errors(c), HasSubstr("export_options.min_kv_scale: must be >= 0"));
}

TEST(ValidationTest, GptqNeedsAStaticQuantizedWeight) {
  Config c = *PresetConfig("bfloat16");
  c.algo_config.push_back(GptqAlgo{});
  EXPECT_THAT(Errors(c), HasSubstr("algo_config[0]: gptq needs a static quantized weight spec in "
                                   "global_quant_config.weight, got bfloat16"));
  // GPTQ rounds with the engine's own quantizer: integer, float and MX weights all work.
  for (const char* preset : {"uint4_wo_128", "fp8", "mxfp4_weight_only"}) {
    c = *PresetConfig(preset);
    c.algo_config.push_back(GptqAlgo{});
    EXPECT_TRUE(ValidationStatus(ValidateConfig(c)).ok()) << preset;
  }
}

TEST(ValidationTest, GptqHyperparameters) {
  Config c = *PresetConfig("uint4_wo_128");
  GptqAlgo gptq;
  gptq.damp_percent = 2;
  gptq.block_size = 0;
  gptq.static_groups = false;
  c.algo_config.push_back(gptq);
  const std::string errors = Errors(c);
  EXPECT_THAT(errors, HasSubstr("algo_config[0].damp_percent: must be in (0, 1], got 2"));
  EXPECT_THAT(errors, HasSubstr("algo_config[0].block_size: must be positive, got 0"));
  EXPECT_THAT(errors, HasSubstr("algo_config[0].static_groups: must be true with desc_act"));
}

// Quark's AWQ searches with the layer's own weight quantizer: every static format but 2-D tiles.
TEST(ValidationTest, AwqNeedsAStaticWeightThatIsNotTiled) {
  for (const char* preset : {"mxfp4_weight_only", "nvfp4", "int4_fp8", "uint4_wo_128"}) {
    Config c = *PresetConfig(preset);
    c.algo_config.push_back(AwqAlgo{});
    EXPECT_EQ(Errors(c), "") << preset;
  }
  Config tiles = *PresetConfig("fp8_block");
  tiles.algo_config.push_back(AwqAlgo{});
  EXPECT_THAT(Errors(tiles), HasSubstr("algo_config[0]: awq does not run per_block weights"));
  Config none = *PresetConfig("uint4_wo_128");
  none.global_quant_config.weight.reset();
  none.algo_config.push_back(AwqAlgo{});
  EXPECT_THAT(Errors(none), HasSubstr("algo_config[0]: awq needs a static quantized weight spec"));
}

TEST(ValidationTest, SmoothQuantNeedsQuantizedInputs) {
  Config c = *PresetConfig("uint4_wo_128");
  c.algo_config.push_back(SmoothQuantAlgo{});
  EXPECT_THAT(Errors(c), HasSubstr("algo_config[0]: smooth (SmoothQuant) needs quantized input_tensors"));
  c = *PresetConfig("int8");
  SmoothQuantAlgo bad;
  bad.alpha = 1.5f;
  c.algo_config.push_back(bad);
  EXPECT_THAT(Errors(c), HasSubstr("algo_config[0].alpha: must be in [0, 1], got 1.5"));
}

TEST(ValidationTest, AutoSmoothQuantLossName) {
  Config c = *PresetConfig("int8");
  AutoSmoothQuantAlgo asq;
  asq.compute_scale_loss = "L1";
  c.algo_config.push_back(asq);
  EXPECT_THAT(Errors(c), HasSubstr("algo_config[0].compute_scale_loss: one of MSE, MAE; got \"L1\""));
}

TEST(ValidationTest, AlgorithmTwice) {
  Config c = *PresetConfig("uint4_wo_128");
  c.algo_config = {GptqAlgo{}, GptqAlgo{}};
  EXPECT_THAT(Errors(c), HasSubstr("algo_config[1]: gptq appears twice"));
}

TEST(ValidationTest, ExcludePatternMatchingNothingInTheModel) {
  Config c = *PresetConfig("fp8");
  c.exclude.push_back("model.layers.99.*");
  const auto modules = LlamaModules();
  EXPECT_THAT(Errors(c, &modules), HasSubstr("exclude[1]: \"model.layers.99.*\" matches no module of the model"));
  EXPECT_TRUE(ValidationStatus(ValidateConfig(c)).ok());  // without a model nothing can be said
}

TEST(ValidationTest, LayerPatternMatchingNothingIsAWarning) {
  Config c = *PresetConfig("fp8");
  c.layer_quant_config.push_back({"*.nothing", c.global_quant_config});
  const auto modules = LlamaModules();
  EXPECT_TRUE(ValidationStatus(ValidateConfig(c, &modules)).ok());
  EXPECT_THAT(Warnings(c, &modules), HasSubstr("layer_quant_config[*.nothing]: matches no module of the model"));
}

TEST(ValidationTest, KvCacheOnAModelWithoutKvProjections) {
  Config c = *PresetConfig("fp8");
  ASSERT_TRUE(ApplyKvCacheDtype("fp8", c).ok());
  std::vector<ModuleInfo> modules = {{"fc1", "Linear", {16, 16}}, {"lm_head", "Linear", {16, 16}}};
  EXPECT_THAT(Errors(c, &modules), HasSubstr("kv_cache_quant_config[*k_proj]: matches no module of the model"));
}

TEST(ValidationTest, EveryErrorIsReportedNotJustTheFirst) {
  Config c = *PresetConfig("int8");
  c.global_quant_config.weight->is_dynamic = true;
  c.global_quant_config.input_tensors->scale_type = ScaleType::kPof2;
  c.global_quant_config.input_tensors->dtype = DType::kInt4;
  const std::string errors = Errors(c);
  EXPECT_THAT(errors, HasSubstr("weight.is_dynamic"));
  EXPECT_THAT(errors, HasSubstr("input_tensors.scale_type"));
}

}  // namespace
}  // namespace quark
