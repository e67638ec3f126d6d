// SmoothQuant, AutoSmoothQuant and AWQ through QuantizeModel: the export carries the smoothed norms and weights (the
// reloaded export computes what the fake-quantized model computed), algo_config is recorded with the scaling layers
// that ran, composition order is checked, and AWQ improves on RTN on the trained fixture.
#include <filesystem>
#include <fstream>
#include <iostream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/config/presets.h"
#include "core/config/proto_convert.h"
#include "core/config/quark_json.h"
#include "core/config/validation.h"
#include "core/quantize/quantize_model.h"
#include "tests/quantize/test_model.h"

namespace quark {
namespace {

QuantizeModelOptions Options(const std::string& preset, std::vector<AlgoConfig> algos) {
  QuantizeModelOptions o;
  auto config = PresetConfig(preset);
  EXPECT_TRUE(config.ok()) << config.status();
  o.config = *config;
  o.config.algo_config = std::move(algos);
  o.calibration_file = testing::SmallEvalText();
  o.num_calibration_samples = 4;
  o.seq_len = 32;
  o.eval_text_file = testing::SmallEvalText();
  o.eval_seq_len = 64;
  o.eval_max_windows = 2;
  return o;
}

bool Contains(const absl::Status& status, const std::string& text) {
  return std::string(status.message()).find(text) != std::string::npos;
}

TEST(SmoothingPipelineTest, SmoothQuantExportCarriesTheSmoothedModel) {
  SmoothQuantAlgo smooth;
  smooth.alpha = 0.5f;
  QuantizeModelOptions o = Options("w_int8_a_int8_per_tensor_sym", {smooth});
  o.output_dir = testing::TempPath("smooth_out");
  auto report = QuantizeModel(testing::WriteSyntheticLlama(), o);
  ASSERT_TRUE(report.ok()) << report.status();
  // The reloaded export (smoothed norms from the export, not the checkpoint) is the fake-quantized model.
  EXPECT_NEAR(report->metrics.at("ppl_after"), report->metrics.at("ppl_reloaded"), 1e-5 * report->metrics.at("ppl_after"));
  const auto& algo = report->quantization_config.at("algo_config");
  ASSERT_EQ(algo.size(), 1u);
  EXPECT_EQ(algo[0].at("name"), "smooth");
  EXPECT_EQ(algo[0].at("alpha"), 0.5);
  // GQA (4 heads over 2 KV heads): Quark's template leaves v_proj -> o_proj out.
  EXPECT_EQ(algo[0].at("scaling_layers").size(), 3u);
  // 3 pairs per layer, 2 layers.
  EXPECT_EQ(report->algorithm_log.size(), 6u);
  // The exported input_layernorm is not the checkpoint's.
  std::ifstream in(std::filesystem::path(o.output_dir) / "config.json");
  EXPECT_TRUE(in.good());
}

TEST(SmoothingPipelineTest, AutoSmoothQuantThenGptqCompose) {
  AutoSmoothQuantAlgo auto_smooth;
  QuantizeModelOptions o = Options("w_int8_a_int8_per_tensor_sym", {auto_smooth, GptqAlgo{}});
  o.output_dir = testing::TempPath("asq_gptq_out");
  auto report = QuantizeModel(testing::WriteSyntheticLlama(), o);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_NEAR(report->metrics.at("ppl_after"), report->metrics.at("ppl_reloaded"), 1e-5 * report->metrics.at("ppl_after"));
  const auto& algo = report->quantization_config.at("algo_config");
  ASSERT_EQ(algo.size(), 2u);
  EXPECT_EQ(algo[0].at("name"), "autosmoothquant");
  EXPECT_EQ(algo[1].at("name"), "gptq");
}

// #30: AWQ searches with the layer's own weight quantizer, as Quark's does, so the float grids take it too: NVFP4
// (its fused shards' shared global scale taken after the scaling), MXFP4 and W4A8. Each exports with its checker,
// reloads as the fake-quantized model, and is not RTN's model.
TEST(SmoothingPipelineTest, AwqRunsOnNvfp4Mxfp4AndW4a8) {
  const std::string model = testing::WriteSyntheticLlama();
  for (const char* preset : {"nvfp4", "mxfp4", "int4_fp8"}) {
    SCOPED_TRACE(preset);
    QuantizeModelOptions awq = Options(preset, {AwqAlgo{}});
    awq.output_dir = testing::TempPath(std::string("awq_float_") + preset);
    const bool nvfp4 = std::string(preset) == "nvfp4";
    if (nvfp4) awq.export_formats = {"hf_quark", "compressed_tensors"};  // both checkers: shared global scales
    auto report = QuantizeModel(model, awq);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_NEAR(report->metrics.at("ppl_after"), report->metrics.at("ppl_reloaded"),
                1e-5 * report->metrics.at("ppl_after"));
    EXPECT_EQ(report->quantization_config.at("algo_config")[0].at("name"), "awq");
    EXPECT_FALSE(report->algorithm_log.empty());
    auto rtn = QuantizeModel(model, Options(preset, {}));
    ASSERT_TRUE(rtn.ok()) << rtn.status();
    EXPECT_NE(report->metrics.at("ppl_after"), rtn->metrics.at("ppl_after"));
  }
}

TEST(SmoothingPipelineTest, ScalingAfterGptqIsRefusedByName) {
  QuantizeModelOptions o = Options("uint4_wo_32", {GptqAlgo{}, AwqAlgo{}});
  auto report = QuantizeModel(testing::WriteSyntheticLlama(), o);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(report.status(), "algo_config[1]")) << report.status();
  EXPECT_TRUE(Contains(report.status(), "awq must come before gptq")) << report.status();
}

TEST(SmoothingPipelineTest, ScalingLayersThatAreNotTheModelsAreNamed) {
  AwqAlgo awq;
  awq.scaling_layers = {{"input_layernorm", {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"},
                         "self_attn.q_proj", ""},
                        {"post_attention_layernorm", {"mlp.gate_proj", "mlp.fc9"}, "", ""}};
  QuantizeModelOptions o = Options("uint4_wo_32", {awq});
  auto report = QuantizeModel(testing::WriteSyntheticLlama(), o);
  ASSERT_FALSE(report.ok());
  EXPECT_TRUE(Contains(report.status(), "algo_config[0].scaling_layers[1].layers[1]: \"mlp.fc9\"")) << report.status();
  awq.scaling_layers = {{"norm_that_is_not", {"self_attn.q_proj"}, "", ""}};
  o = Options("uint4_wo_32", {awq});
  report = QuantizeModel(testing::WriteSyntheticLlama(), o);
  ASSERT_FALSE(report.ok());
  EXPECT_TRUE(Contains(report.status(), "algo_config[0].scaling_layers[0].prev_op")) << report.status();
}

// Quark applies any scaling_layers entry as written; a norm pair that leaves out one of the norm's readers, or lists
// a linear that reads something else, would change the float model before it is quantized.
TEST(SmoothingPipelineTest, ANormPairMustListExactlyTheLinearsThatReadTheNorm) {
  const std::string model = testing::WriteSyntheticLlama();
  AwqAlgo awq;
  awq.scaling_layers = {{"input_layernorm", {"self_attn.q_proj", "self_attn.v_proj"}, "self_attn.q_proj", ""}};
  auto report = QuantizeModel(model, Options("uint4_wo_32", {awq}));
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(report.status(),
                       "algo_config[0].scaling_layers[0].layers: leaves out \"self_attn.k_proj\", which reads "
                       "\"input_layernorm\" too"))
      << report.status();
  SmoothQuantAlgo smooth;
  smooth.scaling_layers = {{"post_attention_layernorm", {"mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"}, "", ""}};
  report = QuantizeModel(model, Options("w_int8_a_int8_per_tensor_sym", {smooth}));
  ASSERT_FALSE(report.ok());
  EXPECT_TRUE(Contains(report.status(), "algo_config[0].scaling_layers[0].layers[2]: \"mlp.down_proj\" does not read "
                                        "\"post_attention_layernorm\""))
      << report.status();
  // The complete pairs (the default template's) run.
  awq.scaling_layers = {{"input_layernorm", {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"},
                         "self_attn.q_proj", "self_attn"},
                        {"post_attention_layernorm", {"mlp.gate_proj", "mlp.up_proj"}, "mlp.gate_proj", "mlp"}};
  report = QuantizeModel(model, Options("uint4_wo_32", {awq}));
  EXPECT_TRUE(report.ok()) << report.status();
}

TEST(SmoothingPipelineTest, AlgoConfigsRoundTripThroughQuarkJsonAndProto) {
  Config config = *PresetConfig("w_int8_a_int8_per_tensor_sym");
  SmoothQuantAlgo smooth;
  smooth.alpha = 0.0f;  // a valid alpha that proto3's zero must not turn into the default
  smooth.scale_clamp_min = 1e-4f;
  smooth.scaling_layers = {{"post_attention_layernorm", {"mlp.gate_proj", "mlp.up_proj"}, "mlp.gate_proj", "mlp"}};
  smooth.model_decoder_layers = "model.layers";
  AutoSmoothQuantAlgo auto_smooth;
  auto_smooth.compute_scale_loss = "MAE";
  AwqAlgo awq;
  awq.grid_size = 10;
  RotationAlgo rotation;
  rotation.random = true;
  config.algo_config = {rotation, smooth, auto_smooth, awq};
  auto from_json = ConfigFromQuarkJson(ConfigToQuarkJson(config));
  ASSERT_TRUE(from_json.ok()) << from_json.status();
  EXPECT_EQ(from_json->algo_config, config.algo_config);
  auto from_proto = FromProto(ToProto(config));
  ASSERT_TRUE(from_proto.ok()) << from_proto.status();
  EXPECT_EQ(from_proto->algo_config, config.algo_config);
}

std::vector<std::string> ErrorPaths(const Config& config) {
  std::vector<std::string> paths;
  for (const ValidationIssue& issue : ValidateConfig(config)) {
    if (issue.severity == ValidationIssue::Severity::kError) paths.push_back(issue.path);
  }
  return paths;
}

TEST(SmoothingPipelineTest, ValidationNamesEveryField) {
  Config w8a8 = *PresetConfig("w_int8_a_int8_per_tensor_sym");
  SmoothQuantAlgo smooth;
  smooth.alpha = 1.5f;
  w8a8.algo_config = {smooth};
  EXPECT_EQ(ErrorPaths(w8a8), std::vector<std::string>{"algo_config[0].alpha"});
  // SmoothQuant moves activation outliers into weights: it needs quantized activations.
  Config weight_only = *PresetConfig("uint4_wo_128");
  weight_only.algo_config = {SmoothQuantAlgo{}};
  EXPECT_EQ(ErrorPaths(weight_only), std::vector<std::string>{"algo_config[0]"});
  // AWQ searches with the weight's own quantizer (Quark's), any static format but 2-D tiles.
  for (const char* preset : {"fp8", "mxfp4"}) {
    Config c = *PresetConfig(preset);
    c.algo_config = {AwqAlgo{}};
    EXPECT_TRUE(ErrorPaths(c).empty()) << preset;
  }
  Config tiles = *PresetConfig("fp8_block");
  tiles.algo_config = {AwqAlgo{}};
  EXPECT_EQ(ErrorPaths(tiles), std::vector<std::string>{"algo_config[0]"});
  // Rotation first; the scaling algorithms before GPTQ.
  Config order = *PresetConfig("uint4_wo_128");
  order.algo_config = {GptqAlgo{}, RotationAlgo{}};
  EXPECT_EQ(ErrorPaths(order), std::vector<std::string>{"algo_config[1]"});
  order.algo_config = {RotationAlgo{}, AwqAlgo{}, GptqAlgo{}};
  EXPECT_TRUE(ErrorPaths(order).empty());
}

TEST(SmoothingPipelineTest, AwqImprovesOnRoundToNearestOnTheTrainedFixture) {
  const std::string model = testing::FixturePath("tinyllama-a");
  QuantizeModelOptions awq = Options("uint4_wo_128", {AwqAlgo{}});
  awq.calibration_file = testing::FixturePath("eval/tinystories_train_split.txt");
  awq.num_calibration_samples = 8;
  awq.seq_len = 128;
  awq.eval_text_file = testing::FixturePath("eval/tinystories_heldout_split.txt");
  awq.eval_seq_len = 256;
  awq.eval_max_windows = 6;
  awq.output_dir = testing::TempPath("awq_out");
  QuantizeModelOptions rtn = awq;
  rtn.config.algo_config.clear();
  rtn.output_dir.clear();
  auto a = QuantizeModel(model, awq);
  auto b = QuantizeModel(model, rtn);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  // The packed export dequantizes in another order than the fake-quantized linears: summation noise, no more.
  EXPECT_NEAR(a->metrics.at("ppl_after"), a->metrics.at("ppl_reloaded"), 3e-5 * a->metrics.at("ppl_after"));
  EXPECT_LT(a->metrics.at("ppl_after"), b->metrics.at("ppl_after"));
  std::cout << "tinyllama-a uint4 g128 (6 windows): float " << a->metrics.at("ppl_before") << ", RTN "
            << b->metrics.at("ppl_after") << ", AWQ " << a->metrics.at("ppl_after") << "\n";
  // Every pair of the Llama template ran (4 heads of 8 over 4 KV heads: no v_proj -> o_proj), 4 layers.
  EXPECT_EQ(a->algorithm_log.size(), 12u);
}

}  // namespace
}  // namespace quark
