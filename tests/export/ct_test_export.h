// Shared by the compressed-tensors tests: a synthetic Llama quantized with a preset and exported as HF-quark and
// compressed-tensors in one pass (the HF-quark export, whose read-back equals the fake-quantized model per
// ExportRoundTripTest, is the reference the compressed-tensors tensors are compared with).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/config/presets.h"
#include "core/quantize/quantize_model.h"
#include "tests/quantize/test_model.h"
#include "tests/quantize/tiny_family_model.h"

namespace quark::testing {

struct CtTestExport {
  std::string hf_quark;            // output/hf_quark
  std::string compressed_tensors;  // output/compressed_tensors
};

/// `config` quantized (2 calibration samples of SmallEvalText) and exported as `formats` into a new folder named
/// after `label`; the folder's path (each format in its own subfolder when there are several).
inline absl::StatusOr<std::string> ExportFormats(const std::string& model, const Config& config,
                                                 const std::string& label, std::vector<std::string> formats) {
  QuantizeModelOptions o;
  o.config = config;
  o.num_calibration_samples = 2;
  o.seq_len = 32;
  o.calibration_file = SmallEvalText();
  o.output_dir = TempPath("quark_ct_" + label);
  o.export_formats = std::move(formats);
  auto report = QuantizeModel(model, o);
  if (!report.ok()) return report.status();
  return o.output_dir;
}

/// `config` quantized and exported as both formats into a new folder named after `label`.
inline absl::StatusOr<CtTestExport> ExportBothWith(const std::string& model, const Config& config,
                                                   const std::string& label) {
  auto dir = ExportFormats(model, config, label, {"hf_quark", "compressed_tensors"});
  if (!dir.ok()) return dir.status();
  return CtTestExport{*dir + "/hf_quark", *dir + "/compressed_tensors"};
}

/// The preset's Config; `preset` may end in "+gptq" or "+awq" (the algorithm appended).
inline absl::StatusOr<Config> PresetWithAlgo(const std::string& preset) {
  const size_t plus = preset.find('+');
  auto config = PresetConfig(preset.substr(0, plus));
  if (!config.ok()) return config.status();
  if (plus != std::string::npos) {
    const std::string algo = preset.substr(plus + 1);
    if (algo == "gptq") config->algo_config.push_back(GptqAlgo{});
    if (algo == "awq") config->algo_config.push_back(AwqAlgo{});
  }
  return config;
}

/// `preset` may end in "+gptq" or "+awq": the algorithm's codes go into both exports.
inline absl::StatusOr<CtTestExport> ExportBoth(const std::string& model, const std::string& preset) {
  auto config = PresetWithAlgo(preset);
  if (!config.ok()) return config.status();
  return ExportBothWith(model, *config, preset.substr(0, preset.find('+')));
}

/// #36 item 5: a mixed recipe over the synthetic Llama's two layers in three compressed-tensors groups and `ignore`:
/// uint4 groups of 32 (WNA16) by default, every o_proj int8 W8A8 (static), layer 1's MLP fp8 W8A8, and layer 0's
/// down_proj left in float.
inline Config MixedRecipe() {
  Config c = *PresetConfig("uint4_wo_32");
  c.layer_quant_config.push_back({"*.o_proj", PresetConfig("int8")->global_quant_config});
  c.layer_quant_config.push_back({"model.layers.1.mlp.*", PresetConfig("fp8")->global_quant_config});
  c.exclude.push_back("model.layers.0.mlp.down_proj");
  return c;
}

/// fp8 with an fp8 KV cache (ApplyKvCacheDtype) quantized and exported as `formats` into a new folder; its path.
inline absl::StatusOr<std::string> ExportFp8WithKvCache(const std::string& model, std::vector<std::string> formats) {
  Config config = *PresetConfig("fp8");
  if (auto s = ApplyKvCacheDtype("fp8", config); !s.ok()) return s;
  return ExportFormats(model, config, "kv", std::move(formats));
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

/// `quark make-model --arch ARCH --shape tiny --dtype f32` with stories260K's tokenizer into `dir`.
inline absl::Status WriteTinyModel(const std::string& arch, const std::string& dir) {
  return MakeTinyFamilyModel(arch, dir, /*seed=*/30);
}

/// The tiny deepseek_v3: MLA with q_lora_rank, the first layer dense, two MoE layers of 16 routed experts and a
/// shared one, an MTP layer.
inline absl::Status WriteTinyDeepseek(const std::string& dir) { return WriteTinyModel("deepseek_v3", dir); }

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
  /// Every written format's presets with the model each tiles (ExportBoth's "+gptq" / "+awq" included).
  static std::vector<std::pair<const char*, const std::string*>> AllFormatCases() {
    return {{"uint4_wo_32", model_},
            {"int4_wo_64", model_},
            {"uint4_wo_per_channel", model_},
            {"int4_wo_per_channel", model_},
            {"int8", model_},
            {"w_int8_per_channel_a_int8_per_token_dynamic", model_},
            {"fp8", model_},
            {"ptpc_fp8", model_},
            {"fp8_block", tiled_},
            {"nvfp4", model_},
            {"nvfp4_weight_only", model_},
            {"mxfp4", model_},  // #30 item 4
            {"mxfp8", model_},
            {"uint4_wo_32+gptq", model_},
            {"nvfp4+gptq", model_},  // #30: GPTQ under NVFP4's shared global scale
            {"fp8_block+gptq", tiled_},
            {"uint4_wo_32+awq", model_}};
  }
  static inline std::string* model_ = nullptr;
  static inline std::string* tiled_ = nullptr;
};

}  // namespace quark::testing
