#include "core/config/layer_plan.h"

#include <gtest/gtest.h>

#include "core/config/presets.h"

namespace quark {
namespace {

std::vector<ModuleInfo> Modules() {
  return {{"model.embed_tokens", "Embedding", {512, 64}},
          {"model.layers.0.self_attn.q_proj", "Linear", {64, 64}},
          {"model.layers.0.self_attn.k_proj", "Linear", {32, 64}},
          {"model.layers.0.mlp.down_proj", "Linear", {64, 172}},
          {"model.layers.1.mlp.down_proj", "Linear", {64, 172}},
          {"lm_head", "Linear", {512, 64}}};
}

QuantSpec Spec(DType dtype) {
  QuantSpec s;
  s.dtype = dtype;
  return s;
}

TEST(LayerPlanTest, PatternThenTypeThenGlobal) {
  Config c;
  c.global_quant_config.weight = Spec(DType::kInt8);
  LayerQuantConfig linear;
  linear.weight = Spec(DType::kFp8E4M3);
  c.layer_type_quant_config["Linear"] = linear;
  LayerQuantConfig down;
  down.weight = Spec(DType::kUInt4);
  c.layer_quant_config.push_back({"*.mlp.down_proj", down});
  const LayerPlan plan = BuildLayerPlan(c, Modules());
  EXPECT_EQ(plan.Find("model.layers.0.mlp.down_proj")->config.weight->dtype, DType::kUInt4);
  EXPECT_EQ(plan.Find("model.layers.0.mlp.down_proj")->SourceLabel(), "layer_quant_config[*.mlp.down_proj]");
  EXPECT_EQ(plan.Find("model.layers.0.self_attn.q_proj")->config.weight->dtype, DType::kFp8E4M3);
  EXPECT_EQ(plan.Find("model.layers.0.self_attn.q_proj")->SourceLabel(), "layer_type_quant_config[Linear]");
  c.layer_type_quant_config.clear();
  EXPECT_EQ(BuildLayerPlan(c, Modules()).Find("model.layers.0.self_attn.q_proj")->SourceLabel(), "global_quant_config");
}

TEST(LayerPlanTest, FirstMatchingPatternWins) {
  Config c;
  LayerQuantConfig first, second;
  first.weight = Spec(DType::kInt4);
  second.weight = Spec(DType::kInt8);
  c.layer_quant_config.push_back({"model.layers.1.*", first});
  c.layer_quant_config.push_back({"*down_proj", second});
  const LayerPlan plan = BuildLayerPlan(c, Modules());
  EXPECT_EQ(plan.Find("model.layers.1.mlp.down_proj")->config.weight->dtype, DType::kInt4);
  EXPECT_EQ(plan.Find("model.layers.0.mlp.down_proj")->config.weight->dtype, DType::kInt8);
}

TEST(LayerPlanTest, ExcludeWinsOverEverything) {
  Config c = *PresetConfig("fp8");
  c.layer_quant_config.push_back({"lm_head", c.global_quant_config});
  c.exclude.push_back("model.layers.0.*");
  const LayerPlan plan = BuildLayerPlan(c, Modules());
  EXPECT_EQ(plan.Find("lm_head")->source, ConfigSource::kExcluded);
  EXPECT_EQ(plan.Find("lm_head")->SourceLabel(), "exclude[lm_head]");
  EXPECT_TRUE(plan.Find("lm_head")->config.Empty());
  EXPECT_EQ(plan.Find("model.layers.0.mlp.down_proj")->SourceLabel(), "exclude[model.layers.0.*]");
  EXPECT_EQ(plan.Find("model.layers.1.mlp.down_proj")->source, ConfigSource::kGlobal);
}

TEST(LayerPlanTest, GlobalConfigDoesNotQuantizeEmbeddings) {
  Config c = *PresetConfig("int8");
  EXPECT_EQ(BuildLayerPlan(c, Modules()).Find("model.embed_tokens")->source, ConfigSource::kUnquantized);
  LayerQuantConfig embedding;
  embedding.weight = Spec(DType::kInt8);
  c.layer_type_quant_config["Embedding"] = embedding;
  EXPECT_EQ(BuildLayerPlan(c, Modules()).Find("model.embed_tokens")->source, ConfigSource::kLayerType);
}

TEST(LayerPlanTest, KvCacheAddsTheOutputSpecToKProjOnly) {
  Config c = *PresetConfig("int4_wo_128");
  ASSERT_TRUE(ApplyKvCacheDtype("fp8", c).ok());
  const LayerPlan plan = BuildLayerPlan(c, Modules());
  ASSERT_TRUE(plan.Find("model.layers.0.self_attn.k_proj")->config.output_tensors);
  EXPECT_EQ(plan.Find("model.layers.0.self_attn.k_proj")->config.output_tensors->dtype, DType::kFp8E4M3);
  EXPECT_EQ(plan.Find("model.layers.0.self_attn.k_proj")->config.weight, c.global_quant_config.weight);
  EXPECT_FALSE(plan.Find("model.layers.0.self_attn.q_proj")->config.output_tensors);
  EXPECT_TRUE(KvCacheSpecFor(c, "model.layers.3.self_attn.v_proj").has_value());
  EXPECT_FALSE(KvCacheSpecFor(c, "model.layers.3.self_attn.o_proj").has_value());
}

}  // namespace
}  // namespace quark
