// Export -> checker -> reload, on a synthetic Llama with GQA: every scheme's tensors in the written files, dynamic
// scales never exported, KV-cache scales, sharding, and the reloaded model equal to the fake-quantized one.
#include <filesystem>

#include <gtest/gtest.h>

#include "core/checkpoint/checkpoint_reader.h"
#include "core/config/presets.h"
#include "core/export/hf_quark_checker.h"
#include "core/numerics/fake_quant.h"
#include "core/numerics/packing.h"
#include "core/quantize/quantize_model.h"
#include "core/quantize/reload.h"
#include "core/runtime/tensor_view.h"
#include "tests/quantize/test_model.h"

namespace quark {
namespace {

class ExportRoundTripTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = new std::string(testing::WriteSyntheticLlama()); }
  static void TearDownTestSuite() { delete model_; }

  // Quantizes the synthetic model with `preset` (and the KV cache) into a fresh folder.
  absl::StatusOr<QuantizeModelReport> Export(const std::string& preset, const std::string& kv, std::string* out,
                                             bool eval = true, int64_t shard_bytes = 5LL << 30) {
    QuantizeModelOptions o;
    o.config = *PresetConfig(preset);
    if (auto s = ApplyKvCacheDtype(kv, o.config); !s.ok()) return s;
    o.num_calibration_samples = 2;
    o.seq_len = 32;
    o.calibration_file = testing::SmallEvalText();
    o.max_shard_bytes = shard_bytes;
    if (eval) {
      o.eval_text_file = testing::SmallEvalText();
      o.eval_seq_len = 64;
      o.eval_max_windows = 2;
    }
    *out = testing::TempPath("quark_export");
    o.output_dir = *out;
    return QuantizeModel(*model_, o);
  }

  static const checkpoint::TensorInfo& Info(const checkpoint::CheckpointReader& r, const std::string& name) {
    auto ref = r.Get(name);
    EXPECT_TRUE(ref.ok()) << name;
    return *ref->info;
  }

  static std::string* model_;
};

std::string* ExportRoundTripTest::model_ = nullptr;

TEST_F(ExportRoundTripTest, ReloadedModelEqualsFakeQuantizedModel) {
  for (const char* preset :
       {"fp8", "int8", "ptpc_fp8", "uint4_wo_32", "int4_wo_64", "mxfp4", "nvfp4", "int4_fp8", "bfloat16"}) {
    std::string out;
    auto report = Export(preset, "", &out);
    ASSERT_TRUE(report.ok()) << preset << ": " << report.status();
    const double fake = report->metrics.at("ppl_after"), reloaded = report->metrics.at("ppl_reloaded");
    EXPECT_LT(std::abs(fake - reloaded) / fake, 1e-4) << preset << " fake " << fake << " reloaded " << reloaded;
    EXPECT_TRUE(exporter::CheckHfQuarkExport(out).ok());
    EXPECT_TRUE(std::filesystem::exists(out + "/tokenizer.model"));
    EXPECT_FALSE(std::filesystem::exists(out + ".partial"));
  }
}

TEST_F(ExportRoundTripTest, Fp8WithKvCacheTensors) {
  std::string out;
  auto report = Export("fp8", "fp8", &out, /*eval=*/false);
  ASSERT_TRUE(report.ok()) << report.status();
  auto reader = checkpoint::CheckpointReader::Open(out);
  ASSERT_TRUE(reader.ok());
  const std::string p = "model.layers.1.self_attn.";
  EXPECT_EQ(Info(**reader, p + "q_proj.weight").dtype, checkpoint::StDType::kF8E4M3);
  EXPECT_EQ(Info(**reader, p + "q_proj.input_scale").shape, std::vector<int64_t>{});
  EXPECT_FALSE((*reader)->Has(p + "q_proj.output_scale"));
  auto k = (*reader)->Get(p + "k_proj.output_scale");
  auto v = (*reader)->Get(p + "v_proj.output_scale");
  ASSERT_TRUE(k.ok() && v.ok());
  EXPECT_EQ(k->bytes(), v->bytes());  // one scale for the block: max(k, v)
  EXPECT_EQ(Info(**reader, "model.norm.weight").dtype, checkpoint::StDType::kF32);
  EXPECT_FALSE((*reader)->Has("lm_head.weight_scale"));
  const auto& qc = report->quantization_config;
  EXPECT_EQ(qc["export"]["kv_cache_group"], nlohmann::ordered_json({"*k_proj", "*v_proj"}));
  EXPECT_EQ(qc["exclude"], nlohmann::ordered_json({"lm_head"}));
}

TEST_F(ExportRoundTripTest, DynamicScalesAreNeverExported) {
  std::string out;
  ASSERT_TRUE(Export("ptpc_fp8", "", &out, false).ok());
  auto reader = checkpoint::CheckpointReader::Open(out);
  ASSERT_TRUE(reader.ok());
  for (const auto& name : (*reader)->Names()) EXPECT_EQ(name.find("input_scale"), std::string::npos) << name;
  EXPECT_EQ(Info(**reader, "model.layers.0.mlp.down_proj.weight_scale").shape, std::vector<int64_t>{64});
}

TEST_F(ExportRoundTripTest, ShardsAboveTheLimitWithAnIndex) {
  std::string out;
  ASSERT_TRUE(Export("uint4_wo_32", "", &out, false, 64 << 10).ok());
  EXPECT_TRUE(std::filesystem::exists(out + "/model.safetensors.index.json"));
  EXPECT_FALSE(std::filesystem::exists(out + "/model.safetensors"));
  auto reader = checkpoint::CheckpointReader::Open(out);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_GT((*reader)->files().size(), 1u);
  const auto& w = Info(**reader, "model.layers.0.mlp.up_proj.weight");  // [128, 64] -> (in, out / 8)
  EXPECT_EQ(w.dtype, checkpoint::StDType::kI32);
  EXPECT_EQ(w.shape, (std::vector<int64_t>{64, 16}));
  // checkpoint-format.md: per-group uint4 scales are F16/BF16; this float32 model gets F16 (scale_dtype.h).
  const auto& scale = Info(**reader, "model.layers.0.mlp.up_proj.weight_scale");
  EXPECT_EQ(scale.dtype, checkpoint::StDType::kF16);
  EXPECT_EQ(scale.shape, (std::vector<int64_t>{2, 128}));
  EXPECT_TRUE(exporter::CheckHfQuarkExport(out).ok());
}

// With a KV cache the reloaded export quantizes K after RoPE, where vLLM writes its cache, and the fake-quantized
// model before it, as Quark's k_proj output quantizer does (kv_cache_reference_test.cc): equal only without one.
TEST_F(ExportRoundTripTest, ReloadedOutputsMatchTheFakeQuantizedLayers) {
  std::string plain;
  auto without = Export("int8", "", &plain, /*eval=*/true);
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_LT(std::abs(without->metrics.at("ppl_after") - without->metrics.at("ppl_reloaded")) /
                without->metrics.at("ppl_after"), 1e-4);
  std::string out;
  auto report = Export("int8", "fp8", &out, /*eval=*/true);
  ASSERT_TRUE(report.ok()) << report.status();
  auto reloaded = quantize::OpenQuantizedExport(out);
  ASSERT_TRUE(reloaded.ok()) << reloaded.status();
  auto hidden = reloaded->streamer->Run({at::arange(1, 20, at::kLong)}, reloaded->hooks);
  ASSERT_TRUE(hidden.ok()) << hidden.status();
  EXPECT_TRUE(at::isfinite((*hidden)[0]).all().item<bool>());
}

// #30 W4A8 as Quark writes it (formats-2026.md 9): the int4 codes packed along K, the fp8 stage's scalar
// weight_scale, the int4 stage's weight_scale_2 [out] and weight_zero_point_2 [out / 8]; decoded by hand, the file
// holds the fake-quantized weight bit for bit; vLLM's quark path is told to load it for MoE experts only.
TEST_F(ExportRoundTripTest, W4A8IsQuarksTwoStageLayoutAndHoldsTheFakeQuantizedWeight) {
  std::string out;
  auto report = Export("int4_fp8", "", &out, /*eval=*/false);
  ASSERT_TRUE(report.ok()) << report.status();
  auto reader = checkpoint::CheckpointReader::Open(out);
  ASSERT_TRUE(reader.ok());
  const std::string m = "model.layers.0.mlp.up_proj";  // [128, 64]
  EXPECT_EQ(Info(**reader, m + ".weight").dtype, checkpoint::StDType::kI32);
  EXPECT_EQ(Info(**reader, m + ".weight").shape, (std::vector<int64_t>{128, 8}));
  EXPECT_EQ(Info(**reader, m + ".weight_scale").shape, std::vector<int64_t>{});
  EXPECT_EQ(Info(**reader, m + ".weight_scale_2").dtype, checkpoint::StDType::kF32);
  EXPECT_EQ(Info(**reader, m + ".weight_scale_2").shape, std::vector<int64_t>{128});
  EXPECT_EQ(Info(**reader, m + ".weight_zero_point_2").shape, std::vector<int64_t>{16});
  EXPECT_FALSE((*reader)->Has(m + ".input_scale"));  // dynamic fp8 activations
  auto view = [&](const checkpoint::CheckpointReader& r, const std::string& name) {
    return *runtime::ViewTensor(*r.Get(name));
  };
  const at::Tensor q = *UnpackInt4(view(**reader, m + ".weight"), PackMethod::kReorder, /*is_signed=*/true);
  const at::Tensor decoded = (q.to(at::kFloat) * view(**reader, m + ".weight_scale_2").unsqueeze(1)) *
                             view(**reader, m + ".weight_scale").reshape({});
  auto source = checkpoint::CheckpointReader::Open(*model_);
  ASSERT_TRUE(source.ok());
  const at::Tensor w = view(**source, m + ".weight").to(at::kFloat);
  const QuantSpec& spec = *PresetConfig("int4_fp8")->global_quant_config.weight;
  auto fake = FakeQuantizeDynamic(w, spec, TensorRole::kWeight);
  ASSERT_TRUE(fake.ok()) << fake.status();
  EXPECT_TRUE(at::equal(decoded, *fake));
  EXPECT_EQ(view(**reader, m + ".weight_zero_point_2").abs().sum().item<int>(), 0);
  EXPECT_TRUE(exporter::CheckHfQuarkExport(out).ok());
  const auto warnings = exporter::VllmQuarkLoadWarnings(report->quantization_config);
  ASSERT_FALSE(warnings.empty());
  EXPECT_NE(warnings[0].find("MoE experts"), std::string::npos) << warnings[0];
  // ONNX's DequantizeLinear has one scale: W4A8 is refused before any work, naming the field.
  QuantizeModelOptions o;
  o.config = *PresetConfig("int4_fp8");
  o.output_dir = testing::TempPath("quark_w4a8_onnx");
  o.export_formats = {"onnx"};
  auto onnx = QuantizeModel(*model_, o);
  ASSERT_FALSE(onnx.ok());
  EXPECT_NE(onnx.status().message().find("q_proj.weight: W4A8's two-stage weight"), std::string::npos) << onnx.status();
}

TEST_F(ExportRoundTripTest, TamperedExportIsRejectedByTheChecker) {
  std::string out;
  ASSERT_TRUE(Export("fp8", "", &out, false).ok());
  std::filesystem::remove(out + "/model.safetensors");
  EXPECT_FALSE(exporter::CheckHfQuarkExport(out).ok());
}

}  // namespace
}  // namespace quark
