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
