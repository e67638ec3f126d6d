// QuantizeModel's exports: several formats in one pass over the model (HF-quark, GGUF, ONNX), each where the options
// say, the GGUF read back to the fake-quantized model's perplexity, llama.cpp's own float quantization when no scheme
// is given, and the refusals that name the field.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/config/config_choice.h"
#include "core/config/presets.h"
#include "core/config/quark_json.h"
#include "core/config/validation.h"
#include "core/export/gguf_source.h"
#include "core/quantize/quantize_model.h"
#include "tests/quantize/test_model.h"

namespace quark {
namespace {

namespace fs = std::filesystem;

QuantizeModelOptions Evaluated(QuantizeModelOptions o) {
  o.eval_text_file = testing::SmallEvalText();
  o.eval_seq_len = 64;
  o.eval_max_windows = 2;
  return o;
}

std::string BytesOf(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Every file below `dir` by relative path, with its bytes.
std::map<std::string, std::string> FilesOf(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) files[fs::relative(entry.path(), dir).string()] = BytesOf(entry.path());
  }
  return files;
}

// #30: the quantization_config an HF-quark export of mxfp8 declares (the weight as E8M0 tiles per_block [1, 32], the
// input MX fp8 per_group 32 dynamic), fed back as a job's config (`quark quantize --config`, the worker: both through
// ResolveConfigChoice), is the mxfp8 preset: it validates, and its export is the preset's, file for file.
TEST(ExportFormatsTest, TheExportedMxfp8ConfigFedBackAsAConfigWritesTheSameBytes) {
  QuantizeModelOptions preset;
  preset.config = *PresetConfig("mxfp8");
  preset.output_dir = testing::TempPath("mxfp8_preset");
  fs::remove_all(preset.output_dir);
  auto first = QuantizeModel(testing::FixturePath("tinyllama-a"), preset);
  ASSERT_TRUE(first.ok()) << first.status();
  const auto exported = nlohmann::ordered_json::parse(BytesOf(fs::path(preset.output_dir) / "config.json"));
  ASSERT_TRUE(exported.contains("quantization_config"));
  auto read = ConfigFromQuarkJson(exported["quantization_config"]);
  ASSERT_TRUE(read.ok()) << read.status();
  ConfigChoice choice;
  choice.config = *read;
  auto fed = ResolveConfigChoice(choice);
  ASSERT_TRUE(fed.ok()) << fed.status();
  for (const ValidationIssue& issue : ValidateConfig(*fed)) {
    EXPECT_NE(issue.severity, ValidationIssue::Severity::kError) << issue.ToString();
  }
  QuantizeModelOptions again = preset;
  again.config = *fed;
  again.output_dir = testing::TempPath("mxfp8_fed_back");
  fs::remove_all(again.output_dir);
  auto second = QuantizeModel(testing::FixturePath("tinyllama-a"), again);
  ASSERT_TRUE(second.ok()) << second.status();
  const auto want = FilesOf(preset.output_dir);
  const auto got = FilesOf(again.output_dir);
  ASSERT_GT(want.size(), 1u);
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, bytes] : want) {
    auto it = got.find(name);
    ASSERT_NE(it, got.end()) << name;
    EXPECT_TRUE(it->second == bytes) << name << " differs";
  }
  fs::remove_all(preset.output_dir);
  fs::remove_all(again.output_dir);
}

// #30: the mxfp8 preset is exported as [1, 32] E8M0 tiles; stories260K's 172-wide down_proj has a last partial block,
// which the export pads as Quark's exporter pads MX (6 scale columns). The export's own check and its read-back took
// the declared tiles literally and refused "[1, 32] does not tile [64, 172]": the export is now checked and read as
// the MX it is, and the read-back is the fake-quantized model.
TEST(ExportFormatsTest, Mxfp8OfAWidthThatIsNotAMultipleOf32ExportsAndReadsBack) {
  QuantizeModelOptions o = Evaluated({});
  o.config = *PresetConfig("mxfp8");
  o.output_dir = testing::TempPath("mxfp8_172");
  fs::remove_all(o.output_dir);
  auto report = QuantizeModel(testing::FixturePath("stories260K"), o);
  ASSERT_TRUE(report.ok()) << report.status();
  const double after = report->metrics.at("ppl_after");
  EXPECT_NEAR(report->metrics.at("ppl_reloaded"), after, 3e-5 * after);
  EXPECT_NE(report->metrics.at("ppl_before"), after);
  fs::remove_all(o.output_dir);
}

TEST(ExportFormatsTest, EveryFormatInOnePassEachInItsPlace) {
  QuantizeModelOptions o;
  o.config = *PresetConfig("uint4_wo_32");
  o.output_dir = testing::TempPath("all_formats");
  o.export_formats = {"hf_quark", "gguf", "onnx"};
  o = Evaluated(o);
  auto report = QuantizeModel(testing::FixturePath("tinyllama-a"), o);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(fs::exists(fs::path(o.output_dir) / "hf_quark" / "config.json"));
  EXPECT_TRUE(fs::exists(fs::path(o.output_dir) / "model.gguf"));
  EXPECT_TRUE(fs::exists(fs::path(o.output_dir) / "onnx" / "model.onnx"));
  EXPECT_NE(std::find(report->files.begin(), report->files.end(), "hf_quark/model.safetensors"), report->files.end());
  EXPECT_NE(std::find(report->files.begin(), report->files.end(), "model.gguf"), report->files.end());
  // uint4 asymmetric g32 is Q4_1 losslessly but for m = -scale * zero_point rounded to f16.
  const double after = report->metrics.at("ppl_after");
  EXPECT_NEAR(report->metrics.at("ppl_reloaded"), after, 3e-5 * after);
  EXPECT_NEAR(report->metrics.at("ppl_gguf"), after, 1e-3 * after);
}

TEST(ExportFormatsTest, OneFormatIsTheOutputItself) {
  QuantizeModelOptions o;
  o.config = *PresetConfig("uint4_wo_32");
  o.output_dir = testing::TempPath("onnx_only");
  o.export_formats = {"onnx"};
  auto report = QuantizeModel(testing::FixturePath("tinyllama-a"), o);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(fs::exists(fs::path(o.output_dir) / "model.onnx"));
  EXPECT_FALSE(report->metrics.count("ppl_gguf"));
}

TEST(ExportFormatsTest, NoSchemeAndAGgufTypeIsLlamaCppsOwnQuantization) {
  QuantizeModelOptions o;  // an empty Config: nothing for the engine to quantize
  o.output_dir = testing::TempPath("gguf_q8");
  o.export_formats = {"gguf"};
  o.gguf_type = "Q8_0";
  o = Evaluated(o);
  auto report = QuantizeModel(testing::FixturePath("tinyllama-a"), o);
  ASSERT_TRUE(report.ok()) << report.status();
  // The fake-quantized model is the float one; Q8_0 moves the perplexity very little.
  EXPECT_EQ(report->metrics.at("ppl_after"), report->metrics.at("ppl_before"));
  EXPECT_NEAR(report->metrics.at("ppl_gguf"), report->metrics.at("ppl_before"), 2e-3 * report->metrics.at("ppl_before"));
  auto source = exporter::GgufWeightSource::Open((fs::path(o.output_dir) / "model.gguf").string());
  ASSERT_TRUE(source.ok()) << source.status();
}

TEST(ExportFormatsTest, TheAccuracyGateFailsWithTheFiguresAndPublishesNothing) {
  QuantizeModelOptions o;
  o.config = *PresetConfig("uint4_wo_128");
  o.output_dir = testing::TempPath("gated");
  o.export_formats = {"hf_quark"};
  o = Evaluated(o);
  o.max_ppl_increase = 0.0;  // any increase breaks it (RTN uint4 raises the perplexity of tinyllama-a)
  auto report = QuantizeModel(testing::FixturePath("tinyllama-a"), o);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), absl::StatusCode::kFailedPrecondition) << report.status();
  const std::string message(report.status().message());
  EXPECT_NE(message.find("accuracy gate: perplexity +"), std::string::npos) << message;
  EXPECT_NE(message.find("% > 0.0%"), std::string::npos) << message;
  EXPECT_NE(message.find("before "), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(o.output_dir));
  // A bound it keeps: the run succeeds and publishes.
  o.max_ppl_increase = 0.5;
  report = QuantizeModel(testing::FixturePath("tinyllama-a"), o);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(fs::exists(fs::path(o.output_dir) / "config.json"));
  // Without evaluation text there is nothing to gate on.
  o.eval_text_file.clear();
  o.output_dir = testing::TempPath("gated_no_eval");
  report = QuantizeModel(testing::FixturePath("tinyllama-a"), o);
  ASSERT_FALSE(report.ok());
  EXPECT_NE(std::string(report.status().message()).find("max_ppl_increase"), std::string::npos) << report.status();
}

TEST(ExportFormatsTest, BadFormatsAndTypesAreNamed) {
  const std::string model = testing::WriteSyntheticLlama();
  const auto expect_error = [&](QuantizeModelOptions o, const std::string& text) {
    o.output_dir = testing::TempPath("bad_formats");
    auto report = QuantizeModel(model, o);
    ASSERT_FALSE(report.ok()) << text;
    EXPECT_NE(std::string(report.status().message()).find(text), std::string::npos) << report.status();
    EXPECT_FALSE(fs::exists(fs::path(o.output_dir) / "model.gguf"));
  };
  QuantizeModelOptions o;
  o.config = *PresetConfig("uint4_wo_32");
  o.export_formats = {"hf_quark", "tflite"};
  expect_error(o, "export_formats[1]: \"tflite\"");
  o.export_formats = {"gguf", "gguf"};
  expect_error(o, "export_formats[0]: gguf appears twice");
  o.export_formats = {"hf_quark"};
  o.gguf_type = "Q4_1";
  expect_error(o, "gguf_type: set, but gguf is not among the export formats");
  o.export_formats = {"gguf"};
  o.gguf_type = "Q5_K";
  expect_error(o, "gguf_type");
  // A scheme GGUF cannot hold is refused before any byte is written, naming the module.
  o.config = *PresetConfig("fp8");
  o.gguf_type.clear();
  expect_error(o, "model.layers.0.");
}

}  // namespace
}  // namespace quark
