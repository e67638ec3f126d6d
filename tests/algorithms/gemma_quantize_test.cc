// Gemma 2 / Gemma 3 text (#18) through the algorithms: the default SmoothQuant/AWQ scaling pairs keep the float layer
// (the (1 + w) norms fold 1/s as (1 + w) / s - 1; a plain w / s fold would change the function), and GPTQ and AWQ run
// through QuantizeModel with an HF-quark export that passes the vLLM rules and reloads to the quantized model.
#include <filesystem>
#include <iostream>

#include <gtest/gtest.h>

#include "core/algorithms/layer_scaling.h"
#include "core/config/presets.h"
#include "core/quantize/quantize_model.h"
#include "core/quantize/scaling_pass.h"
#include "core/runtime/attention.h"
#include "core/runtime/layer_streamer.h"
#include "tests/quantize/test_model.h"
#include "tests/runtime/gemma_models.h"

namespace quark {
namespace {

namespace fs = std::filesystem;

// A tiny Gemma model with random (1 + w) norms and the stories260K tokenizer (vocabulary 512).
std::string WriteTinyGemma(const std::string& model_type) {
  const std::string dir = testing::TempPath("gemma_" + model_type);
  const auto config = runtime::testing::TinyGemmaConfig(model_type, /*window=*/6, model_type == "gemma3_text");
  EXPECT_TRUE(runtime::testing::WriteRandomGemmaModel(config, dir, 3, 0.08).ok());
  fs::copy_file(testing::FixturePath("stories260K/tokenizer.model"), fs::path(dir) / "tokenizer.model");
  return dir;
}

class GemmaAlgorithmsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GemmaAlgorithmsTest, DefaultScalingPairsKeepTheFloatLayer) {
  auto streamer = runtime::LayerStreamer::Open(WriteTinyGemma(GetParam()));
  ASSERT_TRUE(streamer.ok()) << streamer.status();
  runtime::TransformerModel& model = (*streamer)->model();
  at::manual_seed(5);
  const at::Tensor x = model.Embed(at::randint(0, 512, {1, 17}, at::kLong)).value();
  const runtime::LayerContext& context = model.Context(17);
  auto layer = model.LoadLayer(0).value();
  const at::Tensor before = layer->forward(x, context);
  const auto pairs = quantize::DefaultScalingLayers(model.config());
  ASSERT_EQ(pairs.size(), 3u);  // GQA: no v_proj -> o_proj
  EXPECT_EQ(pairs[1].prev_op, "pre_feedforward_layernorm");
  at::manual_seed(9);
  for (const auto& pair : pairs) {
    const int64_t channels = layer->FindLinear(pair.layers[0])->in_features();
    ASSERT_TRUE(algorithms::ApplyScaling(*layer, pair, at::rand({channels}) * 3 + 0.2, {4, 2}).ok()) << pair.prev_op;
  }
  EXPECT_LT((layer->forward(x, context) - before).abs().max().item<double>(), 1e-4);
  // The norm holds HF's w, so the export writes what HF's (1 + w) norm reads.
  runtime::RmsNorm norm(at::full({4}, 0.5), 1e-6, /*unit_offset=*/true);
  norm.DivideOutputs(at::full({4}, 3.0));
  EXPECT_TRUE(at::allclose(norm.weight(), at::full({4}, -0.5)));  // (1 + 0.5) / 3 - 1
}

QuantizeModelOptions Options(const std::string& preset, std::vector<AlgoConfig> algos, const std::string& out) {
  QuantizeModelOptions o;
  o.config = PresetConfig(preset).value();
  o.config.algo_config = std::move(algos);
  o.calibration_file = testing::SmallEvalText();
  o.num_calibration_samples = 4;
  o.seq_len = 32;
  o.eval_text_file = testing::SmallEvalText();
  o.eval_seq_len = 64;
  o.eval_max_windows = 2;
  o.output_dir = out;
  return o;
}

TEST_P(GemmaAlgorithmsTest, GptqAndAwqExportPassTheVllmRulesAndReload) {
  const std::string model = WriteTinyGemma(GetParam());
  for (const bool awq : {false, true}) {
    const std::string out = testing::TempPath("gemma_q_" + GetParam());
    std::vector<AlgoConfig> algos;
    if (awq) {
      algos.push_back(AwqAlgo{});
    } else {
      algos.push_back(GptqAlgo{});
    }
    auto report = QuantizeModel(model, Options("uint4_wo_32", algos, out));
    ASSERT_TRUE(report.ok()) << report.status();
    // The export was checked against vLLM's rules when written (HfQuarkWriter refuses otherwise); reloaded, it
    // computes what the fake-quantized model computed.
    EXPECT_TRUE(fs::exists(fs::path(out) / "config.json"));
    const double after = report->metrics.at("ppl_after");
    EXPECT_NEAR(after, report->metrics.at("ppl_reloaded"), 1e-4 * after);
    EXPECT_GT(after, 1.0);
    const auto& algo = report->quantization_config.at("algo_config");
    ASSERT_EQ(algo.size(), 1u);
    EXPECT_EQ(algo[0].at("name"), awq ? "awq" : "gptq");
    if (awq) EXPECT_EQ(algo[0].at("scaling_layers").size(), 3u);
  }
}

TEST_P(GemmaAlgorithmsTest, RotationIsRefusedNamingTheModel) {
  auto report = QuantizeModel(WriteTinyGemma(GetParam()), Options("uint4_wo_32", {RotationAlgo{}}, ""));
  ASSERT_FALSE(report.ok());
  EXPECT_NE(std::string(report.status().message()).find(GetParam()), std::string::npos) << report.status();
}

// The GGUF export through the pipeline: the engine's uint4 g32 codes as Q4_1, read back by the GGUF reader (norms - 1,
// Gemma names) to the fake-quantized model's figure up to Q4_1's f16 scales. ONNX builds Llama graphs only: refused.
TEST_P(GemmaAlgorithmsTest, GgufExportReloadsAndOnnxIsRefused) {
  const std::string model = WriteTinyGemma(GetParam());
  QuantizeModelOptions o = Options("uint4_wo_32", {}, testing::TempPath("gemma_gguf_" + GetParam()));
  o.export_formats = {"gguf"};
  auto report = QuantizeModel(model, o);
  ASSERT_TRUE(report.ok()) << report.status();
  const double after = report->metrics.at("ppl_after");
  ASSERT_TRUE(report->metrics.count("ppl_gguf"));
  EXPECT_NEAR(report->metrics.at("ppl_gguf"), after, 1e-3 * after);
  std::cout << GetParam() << ": ppl_before " << report->metrics.at("ppl_before") << " ppl_after " << after
            << " ppl_gguf " << report->metrics.at("ppl_gguf") << "\n";
  o = Options("uint4_wo_32", {}, testing::TempPath("gemma_onnx_" + GetParam()));
  o.export_formats = {"onnx"};
  report = QuantizeModel(model, o);
  ASSERT_FALSE(report.ok());
  EXPECT_NE(std::string(report.status().message()).find(GetParam()), std::string::npos) << report.status();
}

INSTANTIATE_TEST_SUITE_P(Archs, GemmaAlgorithmsTest, ::testing::Values("gemma2", "gemma3_text"));

}  // namespace
}  // namespace quark
