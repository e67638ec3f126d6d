// `quark quantize` with the pre-quantization algorithms and several exports, and `quark eval --model` on what it wrote:
// an HF-quark export evaluates to the perplexity the quantize run measured when it read the export back, a GGUF to
// its own figure, and a window past the trained context is refused. Skipped when the quark binary has not been built.
#include <filesystem>
#include <regex>
#include <string>

#include <gtest/gtest.h>

#include "tests/algorithms/cli_run.h"
#include "tests/quantize/test_model.h"
#include "tests/support/require_peer.h"

namespace quark {
namespace {

namespace fs = std::filesystem;
using testing::CliRun;
using testing::Quark;

// The number after `label` in the output ("reloaded 7.4706"), or -1.
double Number(const std::string& output, const std::string& label) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex(label + "\\s+([0-9.]+)"))) return -1;
  return std::stod(m[1]);
}

class ExportsCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::QuarkBinary().empty() || !fs::exists(testing::QuarkBinary())) QUARK_PEER_MISSING() << "quark CLI not built";
  }
  const std::string eval_ = testing::SmallEvalText(20000);
  const std::string eval_args_ = " --text " + eval_ + " --seq-len 128 --max-windows 8";
};

TEST_F(ExportsCliTest, RotationSmoothQuantExportsEvaluateToWhatTheRunMeasured) {
  const std::string out = testing::TempPath("cli_exports");
  const CliRun run = Quark("quantize --model " + testing::FixturePath("tinyllama-a") +
                           " --scheme w_int8_per_channel_a_int8_per_token_dynamic --quant-algo rotation,smoothquant"
                           " --calib " + testing::FixturePath("eval/tinystories_train_split.txt") +
                           " --num-calib-samples 4 --seq-len 64 --eval " + eval_ +
                           " --eval-seq-len 128 --eval-max-windows 8 --output " + out + " --export hf_quark --export onnx");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const double reloaded = Number(run.output, "reloaded");
  ASSERT_GT(reloaded, 0) << run.output;
  const CliRun eval = Quark("eval --model " + (fs::path(out) / "hf_quark").string() + eval_args_);
  ASSERT_EQ(eval.exit_code, 0) << eval.output;
  EXPECT_NEAR(Number(eval.output, "perplexity:"), reloaded, 1e-4 * reloaded) << eval.output;
  EXPECT_TRUE(fs::exists(fs::path(out) / "onnx" / "model.onnx"));
}

TEST_F(ExportsCliTest, GgufWithoutASchemeIsLlamaCppsQuantizationAndEvaluates) {
  const std::string out = testing::TempPath("cli_gguf");
  const CliRun run = Quark("quantize --model " + testing::FixturePath("tinyllama-a") + " --export gguf --gguf-type Q8_0" +
                           " --eval " + eval_ + " --eval-seq-len 128 --eval-max-windows 8 --output " + out);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const double gguf = Number(run.output, "gguf");
  ASSERT_GT(gguf, 0) << run.output;
  const CliRun eval = Quark("eval --model " + (fs::path(out) / "model.gguf").string() + eval_args_);
  ASSERT_EQ(eval.exit_code, 0) << eval.output;
  EXPECT_NEAR(Number(eval.output, "perplexity:"), gguf, 1e-4 * gguf) << eval.output;
}

// The outlier twin computes the float model's function; its outlier channels cost llama.cpp's K-quants accuracy, which
// a rotation of the float weights before llama-quantize's mixture wins back (#37 item 4).
TEST_F(ExportsCliTest, RotationBeforeLlamaCppsKQuantsOnAnOutlierTwin) {
  const std::string twin = testing::TempPath("cli_twin");
  const CliRun made = Quark("outlier-twin --model " + testing::FixturePath("tinyllama-a") + " --output " + twin);
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const CliRun original = Quark("eval --model " + testing::FixturePath("tinyllama-a") + eval_args_);
  const CliRun twin_float = Quark("eval --model " + twin + eval_args_);
  ASSERT_EQ(original.exit_code, 0) << original.output;
  ASSERT_EQ(twin_float.exit_code, 0) << twin_float.output;
  const double float_ppl = Number(original.output, "perplexity:");
  EXPECT_NEAR(Number(twin_float.output, "perplexity:"), float_ppl, 1e-5 * float_ppl) << twin_float.output;

  auto kquant_ppl = [&](const std::string& algo) {
    const std::string out = testing::TempPath("cli_twin_q3km");
    const CliRun run = Quark("quantize --model " + twin + " --export gguf --gguf-type Q3_K_M" + algo + " --output " + out);
    EXPECT_EQ(run.exit_code, 0) << run.output;
    const CliRun eval = Quark("eval --model " + (fs::path(out) / "model.gguf").string() + eval_args_);
    EXPECT_EQ(eval.exit_code, 0) << eval.output;
    return Number(eval.output, "perplexity:");
  };
  const double plain = kquant_ppl("");
  const double rotated = kquant_ppl(" --quant-algo rotation");
  EXPECT_LT(rotated - float_ppl, 0.5 * (plain - float_ppl)) << "float " << float_ppl << ", Q3_K_M " << plain
                                                             << ", rotation + Q3_K_M " << rotated;

  // Without the engine's scheme only rotation, SmoothQuant, AWQ and GPTQ (K-quant-aware) may precede llama.cpp's rules.
  const CliRun gptaq = Quark("quantize --model " + twin +
                             " --export gguf --gguf-type Q4_K_M --quant-algo gptaq --output " +
                             testing::TempPath("cli_twin_gptaq"));
  EXPECT_EQ(gptaq.exit_code, 2) << gptaq.output;
  EXPECT_NE(gptaq.output.find("--quant-algo: gptaq needs --scheme or --config"), std::string::npos) << gptaq.output;
  const CliRun again = Quark("outlier-twin --model " + testing::FixturePath("stories260K") + " --output " + twin);
  EXPECT_EQ(again.exit_code, 2) << again.output;
  EXPECT_NE(again.output.find("--output: " + twin + " exists"), std::string::npos) << again.output;
  const CliRun none = Quark("outlier-twin --model " + testing::FixturePath("stories260K") + " --channels 0 --output " +
                            testing::TempPath("cli_twin_none"));
  EXPECT_EQ(none.exit_code, 2) << none.output;
  EXPECT_NE(none.output.find("--channels: 0 is not in [1, hidden_size"), std::string::npos) << none.output;
}

TEST_F(ExportsCliTest, WindowsPastTheContextAndUnknownTypesAreRefused) {
  const CliRun eval = Quark("eval --model " + testing::FixturePath("tinyllama-a") + " --text " + eval_ + " --seq-len 1024");
  EXPECT_EQ(eval.exit_code, 2) << eval.output;
  EXPECT_NE(eval.output.find("seq_len: 1024 is above the model's max_position_embeddings (512)"), std::string::npos)
      << eval.output;
  const CliRun type = Quark("quantize --model " + testing::FixturePath("tinyllama-a") + " --export gguf --gguf-type Q5_K" +
                            " --output " + testing::TempPath("cli_q5k"));
  EXPECT_EQ(type.exit_code, 2) << type.output;
  EXPECT_NE(type.output.find("gguf_type"), std::string::npos) << type.output;
}

}  // namespace
}  // namespace quark
