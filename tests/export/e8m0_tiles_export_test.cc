// #30 E8M0 tiles in the HF-quark export: the tensors vLLM allocates (weight fp8 [N, K]; weight_scale uint8 [N/R, K/32]
// for QuarkW8A8Mxfp8, float8_e8m0fnu [N/128, K/128] for QuarkW8A8Fp8PerBlock's E8M0 key), the checker's copy of
// vLLM's per_block dispatch (steps 0, 2, 3a), and mxfp8_2d / fp8_block_e8m0 through QuantizeModel on a synthetic Llama
// whose shapes tile: checked, read back to the fake-quantized weights bit for bit, quantized perplexity == reloaded
// perplexity; compressed-tensors, GGUF and ONNX refused before any work naming export_formats[i].
#include <gtest/gtest.h>

#include <filesystem>

#include "core/checkpoint/checkpoint_reader.h"
#include "core/config/presets.h"
#include "core/config/quark_json.h"
#include "core/export/hf_quark_block_rules.h"
#include "core/export/hf_quark_checker.h"
#include "core/export/hf_quark_source.h"
#include "core/export/hf_quark_tensor_plan.h"
#include "core/numerics/fake_quant.h"
#include "core/quantize/quantize_model.h"
#include "core/runtime/tensor_view.h"
#include "kernels/cpu/format_traits.h"
#include "tests/export/ct_test_export.h"
#include "tests/quantize/test_model.h"

namespace quark {
namespace {

using checkpoint::StDType;
using OrderedJson = nlohmann::ordered_json;

TEST(E8m0TilesExportTest, TensorsAreTheOnesVllmAllocates) {
  auto plan = [](const char* preset, int64_t out, int64_t in) {
    return exporter::QuantizedLinearTensors("m", PresetConfig(preset)->global_quant_config, out, in, false,
                                            StDType::kBF16, StDType::kBF16);
  };
  auto mx = plan("mxfp8_2d", 256, 384);
  ASSERT_TRUE(mx.ok()) << mx.status();
  ASSERT_EQ(mx->size(), 2u);  // dynamic input: no input scale
  EXPECT_EQ((*mx)[0].name, "m.weight");
  EXPECT_EQ((*mx)[0].dtypes, std::vector<StDType>{StDType::kF8E4M3});
  EXPECT_EQ((*mx)[0].shape, (std::vector<int64_t>{256, 384}));
  EXPECT_EQ((*mx)[1].name, "m.weight_scale");
  EXPECT_EQ((*mx)[1].dtypes[0], StDType::kU8);  // MXFP8_SCALE_DTYPE; R = 32 views F8_E8M0 bytes as uint8 too
  EXPECT_EQ((*mx)[1].shape, (std::vector<int64_t>{8, 12}));
  auto block = plan("fp8_block_e8m0", 256, 384);
  ASSERT_TRUE(block.ok()) << block.status();
  EXPECT_EQ((*block)[1].dtypes, std::vector<StDType>{StDType::kF8E8M0});
  EXPECT_EQ((*block)[1].shape, (std::vector<int64_t>{2, 3}));
  // R == 1: vLLM's plain loader copies into a uint8 parameter, so only U8 holds the exponent bytes.
  Config rows1 = *PresetConfig("mxfp8_2d");
  rows1.global_quant_config.weight->block_size = {1, 32};
  auto one = exporter::QuantizedLinearTensors("m", rows1.global_quant_config, 64, 96, false, StDType::kBF16,
                                              StDType::kBF16);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ((*one)[1].dtypes, std::vector<StDType>{StDType::kU8});
  EXPECT_EQ((*one)[1].shape, (std::vector<int64_t>{64, 3}));
  auto odd = plan("mxfp8_2d", 48, 64);
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.status().message().find("m.weight: block_size [32, 32] does not tile [48, 64] (rule: out_features % 32"),
            std::string::npos)
      << odd.status();
}

OrderedJson LayerOf(const char* preset) { return LayerConfigToQuarkJson(PresetConfig(preset)->global_quant_config); }

TEST(E8m0TilesExportTest, CheckerFollowsVllmsPerBlockDispatch) {
  for (const char* preset : {"mxfp8_2d", "fp8_block_e8m0", "fp8_block"}) {
    const OrderedJson layer = LayerOf(preset);
    EXPECT_FALSE(exporter::VllmPerBlockProblem(layer["weight"], layer["input_tensors"])) << preset;
  }
  {  // step 0 with R = 128 (vLLM's scale_block_rows) and a one-element input list (unwrapped)
    OrderedJson layer = LayerOf("mxfp8_2d");
    layer["weight"]["block_size"] = OrderedJson::array({128, 32});
    EXPECT_FALSE(exporter::VllmPerBlockProblem(layer["weight"], OrderedJson::array({layer["input_tensors"]})));
  }
  {  // E8M0 tiles neither [R, 32] nor [128, 128]
    OrderedJson layer = LayerOf("fp8_block_e8m0");
    layer["weight"]["block_size"] = OrderedJson::array({64, 64});
    layer["input_tensors"]["group_size"] = 64;
    auto problem = exporter::VllmPerBlockProblem(layer["weight"], layer["input_tensors"]);
    ASSERT_TRUE(problem);
    EXPECT_NE(problem->find("weight.block_size [64,64] with E8M0 tile scales"), std::string::npos) << *problem;
  }
  {  // MXFP8 tiles with inputs in groups of 128: step 0 needs group_size == block_size[1]
    OrderedJson layer = LayerOf("mxfp8_2d");
    layer["input_tensors"]["group_size"] = 128;
    EXPECT_TRUE(exporter::VllmPerBlockProblem(layer["weight"], layer["input_tensors"]));
  }
  {  // the same tiles with float32 scales are not MXFP8 (step 0 needs scale_type float8_e8m0fnu)
    OrderedJson layer = LayerOf("mxfp8_2d");
    layer["weight"]["scale_type"] = "float32";
    EXPECT_TRUE(exporter::VllmPerBlockProblem(layer["weight"], layer["input_tensors"]));
  }
  {  // step 2: per_block without block_size
    OrderedJson layer = LayerOf("fp8_block_e8m0");
    layer["weight"]["block_size"] = nullptr;
    auto problem = exporter::VllmPerBlockProblem(layer["weight"], layer["input_tensors"]);
    ASSERT_TRUE(problem);
    EXPECT_NE(problem->find("weight.block_size: null"), std::string::npos) << *problem;
  }
}

class E8m0TilesModelTest : public testing::CtModelsTest {
 protected:
  absl::StatusOr<QuantizeModelReport> Quantize(const std::string& preset, std::vector<std::string> formats,
                                               const std::string& out, bool eval) {
    QuantizeModelOptions o;
    o.config = *PresetConfig(preset);
    o.num_calibration_samples = 2;
    o.seq_len = 32;
    o.calibration_file = testing::SmallEvalText();
    if (eval) {
      o.eval_text_file = testing::SmallEvalText();
      o.eval_seq_len = 64;
      o.eval_max_windows = 2;
    }
    o.output_dir = out;
    o.export_formats = std::move(formats);
    return QuantizeModel(*tiled_, o);
  }
};

TEST_F(E8m0TilesModelTest, ExportIsCheckedAndReadsBackTheFakeQuantizedModel) {
  for (auto [preset, scale_dtype, scale_shape] :
       {std::tuple{"mxfp8_2d", StDType::kU8, std::vector<int64_t>{16, 8}},
        std::tuple{"fp8_block_e8m0", StDType::kF8E8M0, std::vector<int64_t>{4, 2}}}) {
    const std::string out = testing::TempPath(std::string("quark_e8m0_") + preset);
    auto report = Quantize(preset, {"hf_quark"}, out, /*eval=*/true);
    ASSERT_TRUE(report.ok()) << preset << ": " << report.status();
    const double fake = report->metrics.at("ppl_after"), reloaded = report->metrics.at("ppl_reloaded");
    EXPECT_EQ(fake, reloaded) << preset;
    EXPECT_TRUE(exporter::CheckHfQuarkExport(out).ok()) << exporter::CheckHfQuarkExport(out);
    const OrderedJson& w = report->quantization_config["global_quant_config"]["weight"];
    EXPECT_EQ(w["scale_type"], "float8_e8m0fnu") << preset;

    auto reader = checkpoint::CheckpointReader::Open(out);
    ASSERT_TRUE(reader.ok()) << reader.status();
    const std::string m = "model.layers.0.mlp.up_proj";  // [512, 256]
    const auto* weight = (*reader)->Get(m + ".weight")->info;
    EXPECT_EQ(weight->dtype, StDType::kF8E4M3);
    const auto* scale = (*reader)->Get(m + ".weight_scale")->info;
    EXPECT_EQ(scale->dtype, scale_dtype) << preset;
    EXPECT_EQ(scale->shape, scale_shape) << preset;

    auto source = checkpoint::CheckpointReader::Open(*tiled_);
    ASSERT_TRUE(source.ok());
    const at::Tensor float_w = runtime::ViewTensor(*(*source)->Get(m + ".weight"))->to(at::kFloat);
    const QuantSpec spec = *PresetConfig(preset)->global_quant_config.weight;
    auto params = ParamsOf(float_w, spec, TensorRole::kWeight);
    ASSERT_TRUE(params.ok()) << params.status();
    auto fake_w = FakeQuantize(float_w, spec, *params);
    ASSERT_TRUE(fake_w.ok()) << fake_w.status();
    auto exported = exporter::HfQuarkWeightSource::Open(out, at::kFloat);
    ASSERT_TRUE(exported.ok()) << exported.status();
    auto back = (*exported)->Get(m + ".weight", at::kFloat);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(at::equal(*back, *fake_w)) << preset;
    // The scale bytes are the exponents of the tile scales.
    const at::Tensor bytes = runtime::ViewTensor(*(*reader)->Get(m + ".weight_scale"))->to(at::kInt);
    EXPECT_TRUE(at::equal(bytes, at::log2(params->scale).round().to(at::kInt) + 127)) << preset;
    // vLLM's own decode of the raw tensors, not the engine's reader: QuarkW8A8Mxfp8 repeat_interleaves the scale rows
    // by R and dequant_mxfp8_to_bf16 multiplies each 32-column block by 2^(byte - 127); the 128x128 E8M0 key
    // broadcasts each byte's 2^(byte - 127) over its tile (scaled_dequantize's group_broadcast).
    const auto& e4m3 = kernels::Traits(kernels::ElemFormat::kFp8E4M3);
    at::Tensor table = at::empty({256});
    for (int c = 0; c < 256; ++c) table[c] = e4m3.decode_ref(static_cast<uint8_t>(c));
    const at::Tensor codes = runtime::ViewTensor(*(*reader)->Get(m + ".weight"))->to(at::kLong);
    const at::Tensor scales = at::pow(2.0, (bytes - 127).to(at::kDouble)).to(at::kFloat);
    const int64_t rows = spec.block_size[0], cols = spec.block_size[1];
    const at::Tensor full = scales.repeat_interleave(rows, 0).repeat_interleave(cols, 1);
    EXPECT_TRUE(at::equal(table.index({codes}) * full, *fake_w)) << preset;
  }
}

TEST_F(E8m0TilesModelTest, ExportsThatCannotCarryE8m0TilesAreRefusedNamingTheFormat) {
  struct Case {
    const char* format;
    const char* expected;
  };
  for (const Case& c : {Case{"compressed_tensors", "export_formats[1] (compressed_tensors): "},
                        Case{"gguf", "export_formats[1] (gguf): "}, Case{"onnx", "export_formats[1] (onnx): "}}) {
    const std::string out = testing::TempPath(std::string("quark_e8m0_refused_") + c.format);
    auto report = Quantize("mxfp8_2d", {"hf_quark", c.format}, out, /*eval=*/false);
    ASSERT_FALSE(report.ok()) << c.format;
    const std::string m(report.status().message());
    EXPECT_NE(m.find(c.expected), std::string::npos) << m;
    EXPECT_FALSE(std::filesystem::exists(out + "/hf_quark/model.safetensors")) << c.format << ": work was done";
  }
}

}  // namespace
}  // namespace quark
