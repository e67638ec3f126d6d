// compressed-tensors' quantization_config for each preset it can carry (format, strategy, group sizes, dynamic,
// targets, ignore, kv_cache_scheme), and the schemes it cannot carry refused naming the field.
#include "core/export/ct_config.h"

#include <gtest/gtest.h>

#include "core/config/presets.h"
#include "core/export/ct_checker.h"
#include "core/export/ct_read_config.h"
#include "core/export/ct_targets.h"

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
  EXPECT_EQ((*qc)["config_groups"]["group_0"]["targets"], Json({"re:.*\\.self_attn\\.q_proj$"}));
  EXPECT_EQ((*qc)["config_groups"]["group_1"]["targets"], Json({"re:.*\\.mlp\\.down_proj$"}));
  EXPECT_EQ((*qc)["config_groups"]["group_1"]["format"], "int-quantized");
}

// Three decoder layers of a Llama, every linear, and lm_head.
std::vector<ModuleInfo> ThreeLayers() {
  std::vector<ModuleInfo> modules;
  for (int layer = 0; layer < 3; ++layer) {
    for (const char* linear : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                               "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"}) {
      modules.push_back({"model.layers." + std::to_string(layer) + "." + linear, "Linear", {64, 64}});
    }
  }
  modules.push_back({"lm_head", "Linear", {512, 64}});
  return modules;
}

// #36 item 5: a mixed recipe's groups target their modules with "re:" patterns, and every linear resolves (as vLLM
// resolves it, CtGroupFor) to the group holding its config; the engine's reader gives each module that config back.
TEST(CtConfigTest, AMixedRecipesGroupsTargetTheirModulesWithPatternsThatResolveAsThePlan) {
  Config c = *PresetConfig("int4_wo_128");
  c.layer_quant_config.push_back({"model.layers.1.mlp.*", PresetConfig("int8")->global_quant_config});
  c.exclude.push_back("model.layers.0.self_attn.*");
  const std::vector<ModuleInfo> modules = ThreeLayers();
  const LayerPlan plan = BuildLayerPlan(c, modules);
  auto qc = CompressedTensorsConfig(c, plan);
  ASSERT_TRUE(qc.ok()) << qc.status();
  const Json& groups = (*qc)["config_groups"];
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups["group_0"]["targets"],
            Json({"re:model\\.layers\\.(?:0|2)\\.(?:mlp\\.gate_proj|mlp\\.up_proj|mlp\\.down_proj)$",
                  "re:model\\.layers\\.(?:1|2)\\.(?:self_attn\\.q_proj|self_attn\\.k_proj|self_attn\\.v_proj|"
                  "self_attn\\.o_proj)$"}));
  EXPECT_EQ(groups["group_1"]["targets"],
            Json({"re:model\\.layers\\.1\\.(?:mlp\\.gate_proj|mlp\\.up_proj|mlp\\.down_proj)$"}));
  EXPECT_EQ((*qc)["ignore"],
            Json({"model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj", "model.layers.0.self_attn.v_proj",
                  "model.layers.0.self_attn.o_proj", "lm_head"}));
  auto read = ConfigFromCompressedTensors(*qc, modules);
  ASSERT_TRUE(read.ok()) << read.status();
  const LayerPlan read_plan = BuildLayerPlan(*read, modules);
  for (const LayerAssignment& a : plan.layers) {
    SCOPED_TRACE(a.module);
    const Json g = CtGroupFor(*qc, a.module);
    const LayerAssignment* back = read_plan.Find(a.module);
    ASSERT_NE(back, nullptr);
    if (a.source == ConfigSource::kExcluded) {
      EXPECT_TRUE(g.is_null());
      EXPECT_EQ(back->source, ConfigSource::kExcluded);
      continue;
    }
    const bool eight = a.config.weight->dtype == DType::kInt8;
    EXPECT_EQ(g, groups[eight ? "group_1" : "group_0"]);
    EXPECT_EQ(back->config.weight, a.config.weight);
  }
}

// A pattern that would reach a module of another group falls back to exact names: here "re:.*\.mlp\.down_proj$" of a
// model whose vision tower has a down_proj of its own in another group.
TEST(CtConfigTest, TargetsFallBackToExactNamesWhenAPatternWouldReachAnotherGroup) {
  const std::vector<std::string> linears = {"model.layers.0.mlp.down_proj", "model.layers.1.mlp.down_proj",
                                            "vision.mlp.down_proj"};
  const auto targets = CtGroupTargets({{"model.layers.0.mlp.down_proj", "model.layers.1.mlp.down_proj"},
                                       {"vision.mlp.down_proj"}},
                                      linears);
  EXPECT_EQ(targets[0], std::vector<std::string>({"model.layers.0.mlp.down_proj", "model.layers.1.mlp.down_proj"}));
  EXPECT_EQ(targets[1], std::vector<std::string>({"vision.mlp.down_proj"}));
  // vLLM's and the library's re.match: anchored at the start only.
  EXPECT_TRUE(CtNameMatches("re:model\\.layers\\.1", "model.layers.12.mlp.up_proj"));
  EXPECT_FALSE(CtNameMatches("re:layers", "model.layers.1.mlp.up_proj"));
  EXPECT_FALSE(CtNameMatches("Linear", "model.layers.1.mlp.up_proj"));
}

// vLLM loads q/k/v (and gate/up) as one linear with the first shard's scheme: shards in different schemes, or one of
// them in float, are refused naming both modules and the fused linear.
TEST(CtConfigTest, FusedShardsInDifferentSchemesAreRefusedNamingThem) {
  auto expect_refused = [](const Config& c, const std::vector<std::string>& parts) {
    auto qc = CompressedTensorsConfig(c, BuildLayerPlan(c, ThreeLayers()));
    ASSERT_EQ(qc.status().code(), absl::StatusCode::kInvalidArgument) << qc.status();
    for (const std::string& part : parts) EXPECT_NE(qc.status().message().find(part), std::string::npos) << qc.status();
  };
  Config k_apart = *PresetConfig("int4_wo_128");
  k_apart.layer_quant_config.push_back({"*.2.self_attn.k_proj", PresetConfig("int8")->global_quant_config});
  expect_refused(k_apart, {"model.layers.2.self_attn.k_proj (layer_quant_config[*.2.self_attn.k_proj]) and "
                           "model.layers.2.self_attn.q_proj (global_quant_config): different schemes",
                           "model.layers.2.self_attn.qkv_proj"});
  Config up_float = *PresetConfig("int4_wo_128");
  up_float.exclude.push_back("model.layers.1.mlp.up_proj");
  expect_refused(up_float, {"model.layers.1.mlp.up_proj (exclude[model.layers.1.mlp.up_proj]) and "
                            "model.layers.1.mlp.gate_proj (global_quant_config): one is left in float",
                            "mlp.gate_up_proj"});
}

}  // namespace
}  // namespace quark::exporter
