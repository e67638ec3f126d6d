// Shared by the compressed-tensors tests: a synthetic Llama quantized with a preset and exported as HF-quark and
// compressed-tensors in one pass (the HF-quark export, whose read-back equals the fake-quantized model per
// ExportRoundTripTest, is the reference the compressed-tensors tensors are compared with).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "absl/status/statusor.h"
#include "core/config/presets.h"
#include "core/quantize/quantize_model.h"
#include "tests/quantize/test_model.h"

namespace quark::testing {

struct CtTestExport {
  std::string hf_quark;            // output/hf_quark
  std::string compressed_tensors;  // output/compressed_tensors
};

/// `preset` may end in "+gptq" or "+awq": the algorithm's codes go into both exports.
inline absl::StatusOr<CtTestExport> ExportBoth(const std::string& model, const std::string& preset) {
  QuantizeModelOptions o;
  const size_t plus = preset.find('+');
  auto config = PresetConfig(preset.substr(0, plus));
  if (!config.ok()) return config.status();
  o.config = *config;
  if (plus != std::string::npos) {
    const std::string algo = preset.substr(plus + 1);
    if (algo == "gptq") o.config.algo_config.push_back(GptqAlgo{});
    if (algo == "awq") o.config.algo_config.push_back(AwqAlgo{});
  }
  o.num_calibration_samples = 2;
  o.seq_len = 32;
  o.calibration_file = SmallEvalText();
  o.output_dir = TempPath("quark_ct_" + preset.substr(0, plus));
  o.export_formats = {"hf_quark", "compressed_tensors"};
  auto report = QuantizeModel(model, o);
  if (!report.ok()) return report.status();
  return CtTestExport{o.output_dir + "/hf_quark", o.output_dir + "/compressed_tensors"};
}

/// Dense shapes every scheme tiles: 128-multiples for fp8_block (k/v as wide as q: as many KV heads as heads), at
/// least two blocks along every axis: compressed-tensors' naive decompressor infers the strategy from the scale's
/// shape, and reads a [rows, 1] block scale (in_features 128) as per channel.
inline SyntheticLlamaOptions BlockTiledLlama() {
  SyntheticLlamaOptions o;
  o.hidden = 256;
  o.intermediate = 512;
  o.heads = 8;
  o.kv_heads = 8;
  return o;
}

/// The synthetic Llama and its block-tiled twin, written once per suite.
class CtModelsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = new std::string(WriteSyntheticLlama());
    tiled_ = new std::string(WriteSyntheticLlama(BlockTiledLlama()));
  }
  static void TearDownTestSuite() {
    delete model_;
    delete tiled_;
    model_ = tiled_ = nullptr;
  }
  static inline std::string* model_ = nullptr;
  static inline std::string* tiled_ = nullptr;
};

}  // namespace quark::testing
