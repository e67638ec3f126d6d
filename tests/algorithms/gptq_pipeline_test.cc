// GPTQ through QuantizeModel (export, reload, evaluation), the algo_config wiring (flags, JSON and proto round
// trips, validation messages), and what the engine refuses up front.
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
#include "core/runtime/synthetic_model.h"
#include "tests/quantize/test_model.h"

namespace quark {
namespace {

QuantizeModelOptions GptqRun(const std::string& preset) {
  QuantizeModelOptions o;
  auto config = PresetConfig(preset);
  EXPECT_TRUE(config.ok()) << config.status();
  o.config = *config;
  o.config.algo_config.push_back(GptqAlgo{});
  o.calibration_file = testing::SmallEvalText();
  o.num_calibration_samples = 4;
  o.seq_len = 32;
  return o;
}

// Perplexity before and after on the first `windows` windows of 64 tokens of the small eval text.
void Evaluate(QuantizeModelOptions& o, int windows = 2) {
  o.eval_text_file = testing::SmallEvalText();
  o.eval_seq_len = 64;
  o.eval_max_windows = windows;
}

bool Contains(const absl::Status& status, const std::string& text) {
  return std::string(status.message()).find(text) != std::string::npos;
}

TEST(GptqPipelineTest, QuantizesExportsAndReloadsTheSameModel) {
  QuantizeModelOptions o = GptqRun("uint4_wo_32");
  o.output_dir = testing::TempPath("gptq_out");
  Evaluate(o);
  std::vector<std::string> messages;
  o.on_progress = [&](const QuantizeProgress& p) { messages.push_back(p.message); };
  auto report = QuantizeModel(testing::WriteSyntheticLlama(), o);
  ASSERT_TRUE(report.ok()) << report.status();
  // The fake-quantized model (GPTQ's weights) and the export read back are the same model.
  EXPECT_NEAR(report->metrics.at("ppl_after"), report->metrics.at("ppl_reloaded"),
              1e-5 * report->metrics.at("ppl_after"));
  EXPECT_NE(report->metrics.at("ppl_after"), report->metrics.at("ppl_before"));
  // Progress names every module GPTQ quantizes.
  EXPECT_NE(std::find(messages.begin(), messages.end(), "gptq model.layers.1.mlp.down_proj"), messages.end());
  // The export records the algorithm as it ran, with Quark's defaults filled in.
  std::ifstream in(std::filesystem::path(o.output_dir) / "config.json");
  const auto config = nlohmann::json::parse(in);
  const auto& algo = config.at("quantization_config").at("algo_config");
  ASSERT_EQ(algo.size(), 1u);
  EXPECT_EQ(algo[0].at("name"), "gptq");
  EXPECT_EQ(algo[0].at("inside_layer_modules").size(), 7u);
  EXPECT_EQ(algo[0].at("model_decoder_layers"), "model.layers");
}

TEST(GptqPipelineTest, OptModelsUseTheirOwnModulesAndOrder) {
  runtime::SyntheticModelOptions make;
  make.arch = "opt";
  make.dtype = "f32";
  make.seed = 3;
  make.out_dir = testing::TempPath("gptq_opt");
  make.tokenizer_path = testing::FixturePath("stories260K/tokenizer.model");
  ASSERT_TRUE(runtime::MakeSyntheticModel(make).ok());
  QuantizeModelOptions o = GptqRun("uint4_wo_32");
  o.output_dir = testing::TempPath("gptq_opt_out");
  Evaluate(o);
  std::vector<std::string> messages;
  o.on_progress = [&](const QuantizeProgress& p) { messages.push_back(p.message); };
  auto report = QuantizeModel(make.out_dir, o);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_NEAR(report->metrics.at("ppl_after"), report->metrics.at("ppl_reloaded"), 1e-5 * report->metrics.at("ppl_after"));
  EXPECT_NE(std::find(messages.begin(), messages.end(), "gptq model.decoder.layers.0.fc2"), messages.end());
  const auto& algo = report->quantization_config.at("algo_config");
  EXPECT_EQ(algo[0].at("model_decoder_layers"), "model.decoder.layers");
  EXPECT_EQ(algo[0].at("inside_layer_modules")[3], "self_attn.out_proj");
}

TEST(GptqPipelineTest, GptqWeightsDifferFromRoundToNearest) {
  const std::string model = testing::WriteSyntheticLlama();
  QuantizeModelOptions gptq = GptqRun("int4_wo_32");
  Evaluate(gptq);
  QuantizeModelOptions rtn = gptq;
  rtn.config.algo_config.clear();
  auto a = QuantizeModel(model, gptq);
  auto b = QuantizeModel(model, rtn);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->metrics.at("ppl_before"), b->metrics.at("ppl_before"));
  EXPECT_NE(a->metrics.at("ppl_after"), b->metrics.at("ppl_after"));
}

// #30: NVFP4 (W4A4), fp8_block and W4A8 through GPTQ: exported (HF-quark, and compressed-tensors where it carries the
// scheme), each export's checker passing (NVFP4: q/k/v and gate/up sharing one global scale), read back as the model
// GPTQ made, and not RTN's model.
TEST(GptqPipelineTest, Nvfp4Fp8BlockAndW4a8QuantizeExportAndReload) {
  testing::SyntheticLlamaOptions tiled = testing::Group128Llama();
  tiled.kv_heads = tiled.heads;  // k/v as wide as q: 128 rows tile fp8_block
  const std::string model = testing::WriteSyntheticLlama(tiled);
  for (const char* preset : {"nvfp4", "fp8_block", "int4_fp8"}) {
    SCOPED_TRACE(preset);
    QuantizeModelOptions gptq = GptqRun(preset);
    Evaluate(gptq);
    const bool ct = std::string(preset) != "int4_fp8";  // compressed-tensors has no two-stage W4A8
    gptq.export_formats = ct ? std::vector<std::string>{"hf_quark", "compressed_tensors"}
                             : std::vector<std::string>{"hf_quark"};
    gptq.output_dir = testing::TempPath(std::string("gptq_formats_") + preset);
    QuantizeModelOptions rtn = gptq;
    rtn.config.algo_config.clear();
    rtn.output_dir.clear();
    auto a = QuantizeModel(model, gptq);
    ASSERT_TRUE(a.ok()) << a.status();
    auto b = QuantizeModel(model, rtn);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_NEAR(a->metrics.at("ppl_after"), a->metrics.at("ppl_reloaded"), 1e-5 * a->metrics.at("ppl_after"));
    EXPECT_NE(a->metrics.at("ppl_after"), b->metrics.at("ppl_after"));
    const std::string hf_quark = ct ? gptq.output_dir + "/hf_quark" : gptq.output_dir;
    EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(hf_quark) / "config.json"));
    if (ct) {
      std::ifstream in(std::filesystem::path(gptq.output_dir) / "compressed_tensors" / "config.json");
      const auto config = nlohmann::json::parse(in);
      EXPECT_EQ(config.at("quantization_config").at("quant_method"), "compressed-tensors");
    }
  }
}

TEST(GptqPipelineTest, AlgorithmsQuarkHasAndTheEngineNotAreRefusedByName) {
  for (const char* name : {"quarot", "svdquant"}) {
    auto parsed = AlgoConfigFromQuarkJson({{"name", name}}, "algo_config[0]");
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kUnimplemented) << parsed.status();
    EXPECT_TRUE(Contains(parsed.status(), "algo_config[0]")) << parsed.status();
  }
}

TEST(GptqPipelineTest, CalibrationDataIsRequiredOnlyWhenSomethingUsesIt) {
  const std::string model = testing::WriteSyntheticLlama();
  QuantizeModelOptions o = GptqRun("uint4_wo_32");
  o.calibration_file.clear();
  auto report = QuantizeModel(model, o);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(report.status(), "calibration")) << report.status();
  // With evaluation text, GPTQ calibrates on it.
  Evaluate(o, 1);
  report = QuantizeModel(model, o);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->metrics.at("num_calibration_samples"), 4);
  // Weight-only RTN runs no calibration at all.
  o.config.algo_config.clear();
  o.eval_text_file.clear();
  report = QuantizeModel(model, o);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->metrics.at("num_calibration_samples"), 0);
}

TEST(GptqPipelineTest, InsideLayerModulesThatMatchNothingAreNamed) {
  QuantizeModelOptions o = GptqRun("uint4_wo_32");
  GptqAlgo algo;
  algo.inside_layer_modules = {"self_attn.q_proj", "mlp.nothing"};
  o.config.algo_config = {algo};
  auto report = QuantizeModel(testing::WriteSyntheticLlama(), o);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(report.status(), "algo_config[0].inside_layer_modules[1]")) << report.status();
}

std::vector<std::string> ErrorPaths(const Config& config) {
  std::vector<std::string> paths;
  for (const ValidationIssue& issue : ValidateConfig(config)) {
    if (issue.severity == ValidationIssue::Severity::kError) paths.push_back(issue.path);
  }
  return paths;
}

TEST(GptqPipelineTest, ValidationNamesTheField) {
  Config config = *PresetConfig("uint4_wo_128");
  GptqAlgo algo;
  algo.desc_act = true;
  algo.static_groups = false;
  config.algo_config = {algo};
  EXPECT_EQ(ErrorPaths(config), std::vector<std::string>{"algo_config[0].static_groups"});
  for (float damp : {0.0f, 1.5f, -0.1f}) {
    algo = GptqAlgo{};
    algo.damp_percent = damp;
    config.algo_config = {algo};
    EXPECT_EQ(ErrorPaths(config), std::vector<std::string>{"algo_config[0].damp_percent"}) << damp;
  }
  algo = GptqAlgo{};
  algo.damp_percent = 1.0f;  // (0, 1]
  algo.desc_act = false;
  algo.static_groups = false;  // fine without act order
  config.algo_config = {algo};
  EXPECT_TRUE(ErrorPaths(config).empty());
  // Any static weight format: fp8 too.
  Config fp8 = *PresetConfig("fp8");
  fp8.algo_config = {GptqAlgo{}};
  EXPECT_TRUE(ErrorPaths(fp8).empty());
}

TEST(GptqPipelineTest, AlgoConfigRoundTrips) {
  Config config = *PresetConfig("uint4_wo_128");
  GptqAlgo algo;
  algo.damp_percent = 0.05f;
  algo.desc_act = false;
  algo.static_groups = false;
  algo.block_size = 64;
  algo.inside_layer_modules = {"self_attn.q_proj", "mlp.down_proj"};
  algo.model_decoder_layers = "model.layers";
  config.algo_config = {algo};
  auto from_quark = ConfigFromQuarkJson(ConfigToQuarkJson(config));
  ASSERT_TRUE(from_quark.ok()) << from_quark.status();
  EXPECT_EQ(*from_quark, config);
  auto from_proto = FromProto(ToProto(config));
  ASSERT_TRUE(from_proto.ok()) << from_proto.status();
  EXPECT_EQ(*from_proto, config);
  auto json = ConfigToProtoJson(config);
  ASSERT_TRUE(json.ok());
  auto from_json = ConfigFromProtoJson(*json);
  ASSERT_TRUE(from_json.ok()) << from_json.status();
  EXPECT_EQ(*from_json, config);
}

TEST(GptqPipelineTest, QuantAlgoFlags) {
  auto plain = AlgorithmsFromFlags({"gptq"}, "");
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_EQ(plain->size(), 1u);
  EXPECT_EQ(std::get<GptqAlgo>((*plain)[0]), GptqAlgo{});
  const std::string file = testing::TempPath("algo") + ".json";
  std::ofstream(file) << R"({"name": "gptq", "damp_percent": 0.05, "desc_act": false, "block_size": 64})";
  auto configured = AlgorithmsFromFlags({"gptq"}, file);
  ASSERT_TRUE(configured.ok()) << configured.status();
  EXPECT_FLOAT_EQ(std::get<GptqAlgo>((*configured)[0]).damp_percent, 0.05f);
  EXPECT_EQ(std::get<GptqAlgo>((*configured)[0]).block_size, 64);
  auto file_only = AlgorithmsFromFlags({}, file);
  ASSERT_TRUE(file_only.ok());
  EXPECT_EQ(*file_only, *configured);
  auto unknown = AlgorithmsFromFlags({"gptq,nope"}, "");
  ASSERT_FALSE(unknown.ok());
  EXPECT_TRUE(Contains(unknown.status(), "--quant-algo[1]")) << unknown.status();
  EXPECT_EQ(AlgorithmsFromFlags({"quarot"}, "").status().code(), absl::StatusCode::kUnimplemented);
  auto qronos = AlgorithmsFromFlags({"qronos"}, "");  // asymmetric_pipeline_test.cc checks its fields
  ASSERT_TRUE(qronos.ok()) << qronos.status();
  EXPECT_EQ(std::get<GptqAlgo>((*qronos)[0]).method, HessianMethod::kQronos);
  std::ofstream(file) << "{not json";
  EXPECT_TRUE(Contains(AlgorithmsFromFlags({"gptq"}, file).status(), "--quant-algo-config-file"));
  // A preset plus flags: appended to the preset's (empty) algo_config.
  ConfigChoice choice;
  choice.preset = "uint4_wo_128";
  choice.algorithms = *plain;
  auto resolved = ResolveConfigChoice(choice);
  ASSERT_TRUE(resolved.ok());
  EXPECT_EQ(resolved->algo_config.size(), 1u);
}

}  // namespace
}  // namespace quark
