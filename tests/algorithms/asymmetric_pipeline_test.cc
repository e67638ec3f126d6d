// GPTAQ and Qronos through the engine: Quark's algo_config form (fields, defaults, refusals naming the field), the
// validation rules, and QuantizeModel on a synthetic Llama (export and reload agree, the float stream moves on,
// the result is not GPTQ's), resumed from a layer checkpoint.
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/config/config_choice.h"
#include "core/config/config_json.h"
#include "core/config/presets.h"
#include "core/config/quark_json.h"
#include "core/config/validation.h"
#include "core/quantize/quantize_model.h"
#include "tests/quantize/scenario_run.h"
#include "tests/quantize/test_model.h"

namespace quark {
namespace {

bool Contains(const absl::Status& status, const std::string& text) {
  return std::string(status.message()).find(text) != std::string::npos;
}

absl::StatusOr<AlgoConfig> Parse(const nlohmann::ordered_json& j) { return AlgoConfigFromQuarkJson(j, "algo_config[0]"); }

TEST(AsymmetricPipelineTest, QuarksFieldsAndDefaults) {
  auto gptaq = Parse({{"name", "gptaq"}});
  ASSERT_TRUE(gptaq.ok()) << gptaq.status();
  const GptqAlgo& a = std::get<GptqAlgo>(*gptaq);
  EXPECT_EQ(a.method, HessianMethod::kGptaq);
  EXPECT_EQ(a.alpha, 0.25);
  EXPECT_FLOAT_EQ(a.damp_percent, 0.01f);
  EXPECT_TRUE(a.desc_act);
  EXPECT_TRUE(a.static_groups);
  EXPECT_EQ(a.block_size, 128);
  EXPECT_EQ(AlgoName(*gptaq), "gptaq");
  auto qronos = Parse({{"name", "qronos"}, {"alpha", 0.01}, {"beta", 100}, {"block_size", 64}});
  ASSERT_TRUE(qronos.ok()) << qronos.status();
  const GptqAlgo& q = std::get<GptqAlgo>(*qronos);
  EXPECT_EQ(q.method, HessianMethod::kQronos);
  EXPECT_EQ(q.alpha, 0.01);
  EXPECT_EQ(q.beta, 100);
  EXPECT_EQ(q.block_size, 64);
  EXPECT_EQ(std::get<GptqAlgo>(*Parse({{"name", "qronos"}})).alpha, 1e-3);
  // Written back in Quark's form and read again: the same entry.
  Config c;
  c.algo_config = {*qronos};
  auto again = ConfigFromQuarkJson(ConfigToQuarkJson(c));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->algo_config, c.algo_config);
  EXPECT_EQ(ConfigToQuarkJson(c)["algo_config"][0].count("damp_percent"), 0u);
  // The API's Config carries them too (AlgoConfig.qronos, #35): through proto JSON and back, the same entry.
  auto proto_json = ConfigToProtoJson(c);
  ASSERT_TRUE(proto_json.ok()) << proto_json.status();
  auto from_proto = ConfigFromProtoJson(*proto_json);
  ASSERT_TRUE(from_proto.ok()) << from_proto.status();
  EXPECT_EQ(from_proto->algo_config, c.algo_config);
}

TEST(AsymmetricPipelineTest, FieldsQuarkDoesNotHaveAreRefusedByName) {
  auto gptaq = Parse({{"name", "gptaq"}, {"true_sequential", true}});
  ASSERT_FALSE(gptaq.ok());
  EXPECT_TRUE(Contains(gptaq.status(), "algo_config[0].true_sequential")) << gptaq.status();
  auto qronos = Parse({{"name", "qronos"}, {"damp_percent", 0.01}});
  ASSERT_FALSE(qronos.ok());
  EXPECT_TRUE(Contains(qronos.status(), "algo_config[0].damp_percent")) << qronos.status();
  auto typed = Parse({{"name", "qronos"}, {"beta", "big"}});
  ASSERT_FALSE(typed.ok());
  EXPECT_TRUE(Contains(typed.status(), "algo_config[0].beta")) << typed.status();
}

TEST(AsymmetricPipelineTest, ValidationNamesTheField) {
  const auto errors = [](std::vector<AlgoConfig> algos, const std::string& preset = "uint4_wo_128") {
    Config c = *PresetConfig(preset);
    c.algo_config = std::move(algos);
    return std::string(ValidationStatus(ValidateConfig(c)).message());
  };
  GptqAlgo gptaq = std::get<GptqAlgo>(*Parse({{"name", "gptaq"}}));
  GptqAlgo qronos = std::get<GptqAlgo>(*Parse({{"name", "qronos"}}));
  EXPECT_EQ(errors({gptaq}), "");
  EXPECT_EQ(errors({qronos}), "");
  GptqAlgo bad = gptaq;
  bad.alpha = -1;
  EXPECT_NE(errors({bad}).find("algo_config[0].alpha"), std::string::npos) << errors({bad});
  bad = qronos;
  bad.beta = 0;
  EXPECT_NE(errors({bad}).find("algo_config[0].beta"), std::string::npos) << errors({bad});
  bad = qronos;
  bad.desc_act = false;
  bad.static_groups = false;
  EXPECT_NE(errors({bad}).find("algo_config[0].static_groups"), std::string::npos) << errors({bad});
  EXPECT_NE(errors({GptqAlgo{}, gptaq}).find("algo_config[1]: gptaq after gptq"), std::string::npos)
      << errors({GptqAlgo{}, gptaq});
  EXPECT_NE(errors({qronos, AwqAlgo{}}).find("awq must come before qronos"), std::string::npos)
      << errors({qronos, AwqAlgo{}});
}

// 4 calibration samples of 32 tokens, 2 evaluation windows of 64 (scenario_run.h), uint4 g32, `name` with defaults.
QuantizeModelOptions RunOptions(const std::string& name) {
  auto algo = Parse({{"name", name}});
  EXPECT_TRUE(algo.ok()) << algo.status();
  return testing::ScenarioOptions(testing::Scenario{name, "uint4_wo_32", {*algo}, {}}, testing::SmallEvalText(), "", "");
}

TEST(AsymmetricPipelineTest, QuantizesExportsAndReloads) {
  const std::string model = testing::WriteSyntheticLlama();
  auto gptq = QuantizeModel(model, RunOptions("gptq"));
  ASSERT_TRUE(gptq.ok()) << gptq.status();
  for (const char* name : {"gptaq", "qronos"}) {
    QuantizeModelOptions o = RunOptions(name);
    o.output_dir = testing::TempPath(std::string(name) + "_out");
    auto report = QuantizeModel(model, o);
    ASSERT_TRUE(report.ok()) << name << ": " << report.status();
    EXPECT_NEAR(report->metrics.at("ppl_after"), report->metrics.at("ppl_reloaded"),
                1e-5 * report->metrics.at("ppl_after"))
        << name;
    EXPECT_NE(report->metrics.at("ppl_after"), gptq->metrics.at("ppl_after")) << name;
    EXPECT_EQ(report->quantization_config.at("algo_config")[0].at("name"), name);
    EXPECT_EQ(report->quantization_config.at("algo_config")[0].at("inside_layer_modules").size(), 7u);
  }
}

TEST(AsymmetricPipelineTest, FlagsSelectThem) {
  auto algos = AlgorithmsFromFlags({"gptaq"}, "");
  ASSERT_TRUE(algos.ok()) << algos.status();
  EXPECT_EQ(std::get<GptqAlgo>((*algos)[0]).method, HessianMethod::kGptaq);
}

}  // namespace
}  // namespace quark
