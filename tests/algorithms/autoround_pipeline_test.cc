// AutoRound (#35 item 2) through the config (auto-round's parameter names in algo_config, the flag, JSON and proto
// round trips, every bad value refused naming algo_config[i].field, the formats it refuses) and through
// QuantizeModel (export, reload, the algorithm log).
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/config/config_choice.h"
#include "core/config/config_json.h"
#include "core/config/presets.h"
#include "core/config/proto_convert.h"
#include "core/config/quark_json.h"
#include "core/config/validation.h"
#include "core/quantize/quantize_model.h"
#include "tests/quantize/test_model.h"

namespace quark {
namespace {

std::vector<std::string> ErrorPaths(const Config& config) {
  std::vector<std::string> paths;
  for (const ValidationIssue& issue : ValidateConfig(config)) {
    if (issue.severity == ValidationIssue::Severity::kError) paths.push_back(issue.path + ": " + issue.message);
  }
  return paths;
}

absl::StatusOr<AlgoConfig> Parse(const std::string& json) {
  return AlgoConfigFromQuarkJson(nlohmann::ordered_json::parse(json), "algo_config[0]");
}

std::string MessageOf(const absl::StatusOr<AlgoConfig>& algo) {
  return algo.ok() ? "ok" : std::string(algo.status().message());
}

TEST(AutoRoundConfigTest, AutoRoundsNamesAndDefaults) {
  auto plain = Parse(R"({"name": "autoround"})");
  ASSERT_TRUE(plain.ok()) << plain.status();
  const AutoRoundAlgo a = std::get<AutoRoundAlgo>(*plain);
  EXPECT_EQ(a.iters, 200);
  EXPECT_FALSE(a.lr.has_value()) << "auto-round's None: 1 / iters";
  EXPECT_FALSE(a.minmax_lr.has_value());
  EXPECT_EQ(a.batch_size, 8);
  EXPECT_TRUE(a.enable_minmax_tuning);
  EXPECT_FALSE(a.not_use_best_mse);
  auto set = Parse(R"({"name": "autoround", "iters": 50, "lr": 0.01, "minmax_lr": null, "batch_size": 4,
                       "gradient_accumulate_steps": 2, "enable_minmax_tuning": false, "seed": 7})");
  ASSERT_TRUE(set.ok()) << set.status();
  const AutoRoundAlgo b = std::get<AutoRoundAlgo>(*set);
  EXPECT_EQ(b.iters, 50);
  EXPECT_FLOAT_EQ(*b.lr, 0.01f);
  EXPECT_FALSE(b.minmax_lr.has_value());
  EXPECT_EQ(b.gradient_accumulate_steps, 2);
  EXPECT_FALSE(b.enable_minmax_tuning);
  EXPECT_EQ(b.seed, 7);
  auto flags = AlgorithmsFromFlags({"autoround"}, "");
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(std::get<AutoRoundAlgo>((*flags)[0]), AutoRoundAlgo{});
}

TEST(AutoRoundConfigTest, BadValuesAreRefusedNamingTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"("iters": 0)", "algo_config[0].iters: must be positive"},
      {R"("iters": -5)", "algo_config[0].iters: must be positive"},
      {R"("iters": 2.5)", "algo_config[0].iters: expected an integer"},
      {R"("lr": 0)", "algo_config[0].lr: must be in (0, 1]"},
      {R"("lr": 1.5)", "algo_config[0].lr: must be in (0, 1]"},
      {R"("lr": "fast")", "algo_config[0].lr: expected a number or null"},
      {R"("minmax_lr": -0.1)", "algo_config[0].minmax_lr: must be in (0, 1]"},
      {R"("batch_size": 0)", "algo_config[0].batch_size: must be positive"},
      {R"("gradient_accumulate_steps": 0)", "algo_config[0].gradient_accumulate_steps: must be positive"},
      {R"("enable_minmax_tuning": 1)", "algo_config[0].enable_minmax_tuning: expected true or false"},
      {R"("nsamples": 128)", "algo_config[0].nsamples: unknown autoround parameter"},
  };
  for (const auto& [field, expected] : cases) {
    const std::string message = MessageOf(Parse(R"({"name": "autoround", )" + field + "}"));
    EXPECT_NE(message.find(expected), std::string::npos) << field << " -> " << message;
  }
}

TEST(AutoRoundConfigTest, RoundTripsThroughQuarkJsonAndProto) {
  Config config = *PresetConfig("uint4_wo_128");
  AutoRoundAlgo algo;
  algo.iters = 20;
  algo.lr = 0.02f;
  algo.batch_size = 2;
  algo.not_use_best_mse = true;
  algo.seed = 3;
  algo.model_decoder_layers = "model.layers";
  config.algo_config = {algo};
  auto from_quark = ConfigFromQuarkJson(ConfigToQuarkJson(config));
  ASSERT_TRUE(from_quark.ok()) << from_quark.status();
  EXPECT_EQ(*from_quark, config);
  auto from_proto = FromProto(ToProto(config));
  ASSERT_TRUE(from_proto.ok()) << from_proto.status();
  EXPECT_EQ(*from_proto, config);
  config.algo_config = {AutoRoundAlgo{}};  // the unset learning rates stay unset
  auto defaults = FromProto(ToProto(config));
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(*defaults, config);
}

TEST(AutoRoundConfigTest, OrdersAndFormatsThatMakeNoSenseAreRefused) {
  Config config = *PresetConfig("uint4_wo_128");
  config.algo_config = {AwqAlgo{}, AutoRoundAlgo{}};
  EXPECT_TRUE(ErrorPaths(config).empty()) << "a scaling algorithm before AutoRound is fine";
  config.algo_config = {GptqAlgo{}, AutoRoundAlgo{}};
  ASSERT_EQ(ErrorPaths(config).size(), 1u);
  EXPECT_EQ(ErrorPaths(config)[0].rfind("algo_config[1]: autoround after gptq", 0), 0u) << ErrorPaths(config)[0];
  config.algo_config = {AutoRoundAlgo{}, GptqAlgo{}};
  ASSERT_EQ(ErrorPaths(config).size(), 1u);
  EXPECT_EQ(ErrorPaths(config)[0].rfind("algo_config[1]: gptq after autoround", 0), 0u) << ErrorPaths(config)[0];
  config.algo_config = {AutoRoundAlgo{}, AwqAlgo{}};
  ASSERT_EQ(ErrorPaths(config).size(), 1u);
  EXPECT_NE(ErrorPaths(config)[0].find("awq must come before autoround"), std::string::npos);
  AutoRoundAlgo bad;
  bad.iters = 0;
  bad.lr = 2.0f;
  config.algo_config = {bad};
  EXPECT_EQ(ErrorPaths(config), std::vector<std::string>{"algo_config[0].iters: must be positive, got 0"});
  // Formats: integer per-group / per-channel weights only.
  for (const char* preset : {"uint4_wo_32", "int4_wo_128", "uint4_wo_per_channel", "int4_wo_per_channel"}) {
    Config ok = *PresetConfig(preset);
    ok.algo_config = {AutoRoundAlgo{}};
    EXPECT_TRUE(ErrorPaths(ok).empty()) << preset;
  }
  for (const auto& [preset, why] : std::vector<std::pair<std::string, std::string>>{
           {"fp8", "an integer weight grid"},
           {"nvfp4_weight_only", "an integer weight grid"},
           {"int8", "per_group or per_channel weight scales, got per_tensor"}}) {
    Config refused = *PresetConfig(preset);
    refused.algo_config = {AutoRoundAlgo{}};
    const auto paths = ErrorPaths(refused);
    ASSERT_FALSE(paths.empty()) << preset;
    EXPECT_EQ(paths.back().rfind("algo_config[0]: autoround needs " + why, 0), 0u) << paths.back();
  }
}

QuantizeModelOptions AutoRoundRun(const std::string& preset, int iters) {
  QuantizeModelOptions o;
  o.config = *PresetConfig(preset);
  AutoRoundAlgo algo;
  algo.iters = iters;
  algo.batch_size = 2;
  o.config.algo_config = {algo};
  o.calibration_file = testing::SmallEvalText();
  o.num_calibration_samples = 4;
  o.seq_len = 32;
  o.eval_text_file = testing::SmallEvalText();
  o.eval_seq_len = 64;
  o.eval_max_windows = 2;
  return o;
}

TEST(AutoRoundPipelineTest, QuantizesExportsAndReloadsTheSameModel) {
  QuantizeModelOptions o = AutoRoundRun("uint4_wo_32", 30);
  o.output_dir = testing::TempPath("autoround_out");
  auto report = QuantizeModel(testing::WriteSyntheticLlama(), o);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_NEAR(report->metrics.at("ppl_after"), report->metrics.at("ppl_reloaded"),
              1e-5 * report->metrics.at("ppl_after"));
  ASSERT_EQ(report->algorithm_log.size(), 2u);
  EXPECT_EQ(report->algorithm_log[0].rfind("autoround model.layers.0.: 7 linears, loss ", 0), 0u)
      << report->algorithm_log[0];
  std::ifstream in(std::filesystem::path(o.output_dir) / "config.json");
  const auto exported = nlohmann::json::parse(in)["quantization_config"]["algo_config"];
  ASSERT_EQ(exported.size(), 1u);
  EXPECT_EQ(exported[0]["name"], "autoround");
  EXPECT_EQ(exported[0]["iters"], 30);
  // Round to nearest on the same model: AutoRound's weights are others.
  QuantizeModelOptions rtn = AutoRoundRun("uint4_wo_32", 1);
  rtn.config.algo_config.clear();
  auto plain = QuantizeModel(testing::WriteSyntheticLlama(), rtn);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_NE(plain->metrics.at("ppl_after"), report->metrics.at("ppl_after"));
}

TEST(AutoRoundPipelineTest, AModuleWithAnotherFormatIsNamed) {
  QuantizeModelOptions o = AutoRoundRun("uint4_wo_32", 2);
  PatternQuantConfig fp8;
  fp8.pattern = "*down_proj";
  fp8.config = PresetConfig("fp8")->global_quant_config;
  fp8.config.input_tensors.reset();
  o.config.layer_quant_config = {fp8};
  auto report = QuantizeModel(testing::WriteSyntheticLlama(), o);
  ASSERT_FALSE(report.ok());
  EXPECT_NE(std::string(report.status().message()).find("algo_config[0]: model.layers.0.mlp.down_proj: autoround needs"),
            std::string::npos)
      << report.status();
}

}  // namespace
}  // namespace quark
