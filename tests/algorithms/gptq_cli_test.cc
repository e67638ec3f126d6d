// `quark quantize --quant-algo gptq` end to end (export with the algorithm recorded), evaluation-only runs of a scheme
// the export cannot pack, and the CLI's refusals. Skipped when the quark binary has not been built.
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/algorithms/cli_run.h"
#include "tests/quantize/test_model.h"
#include "tests/support/require_peer.h"

namespace quark {
namespace {

namespace fs = std::filesystem;

using testing::CliRun;
using testing::Quark;
using testing::QuarkBinary;

class GptqCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (QuarkBinary().empty() || !fs::exists(QuarkBinary())) QUARK_PEER_MISSING() << "quark CLI not built";
  }
};

TEST_F(GptqCliTest, QuantizeWithGptqWritesAnExportThatRecordsIt) {
  const std::string out = testing::TempPath("gptq_cli");
  const CliRun run = Quark("quantize --model " + testing::FixturePath("tinyllama-a") +
                        " --scheme uint4_wo_128 --quant-algo gptq --calib " +
                        testing::FixturePath("eval/tinystories_train_split.txt") +
                        " --num-calib-samples 2 --seq-len 32 --output " + out);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::ifstream in(fs::path(out) / "config.json");
  const auto config = nlohmann::json::parse(in);
  EXPECT_EQ(config["quantization_config"]["algo_config"][0]["name"], "gptq") << config.dump(2);
}

TEST_F(GptqCliTest, EvaluationOnlyRunsASchemeTheExportCannotPack) {
  // int4 per channel packs eight codes per word along in_features and eight zero points per word (#30), and
  // stories260K's down_proj has 172 columns, gate_proj 172 channels.
  const std::string args = "quantize --model " + testing::FixturePath("stories260K") +
                           " --scheme int4_wo_per_channel --eval " + testing::SmallEvalText() +
                           " --eval-seq-len 64 --eval-max-windows 1";
  const CliRun evaluate = Quark(args);
  ASSERT_EQ(evaluate.exit_code, 0) << evaluate.output;
  EXPECT_NE(evaluate.output.find("perplexity: float"), std::string::npos) << evaluate.output;
  const CliRun exporting = Quark(args + " --output " + testing::TempPath("unpackable"));
  EXPECT_EQ(exporting.exit_code, 2) << exporting.output;
}

TEST_F(GptqCliTest, RefusalsNameTheCause) {
  const std::string model = " --model " + testing::FixturePath("tinyllama-a") + " --scheme uint4_wo_128";
  CliRun run = Quark("quantize" + model + " --quant-algo gptq,rotation --calib " + testing::SmallEvalText() +
                     " --output " + testing::TempPath("order"));
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("algo_config[1]: rotation must be the first algorithm"), std::string::npos) << run.output;
  run = Quark("quantize" + model + " --quant-algo gptq --output " + testing::TempPath("nocalib"));
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("calibration"), std::string::npos) << run.output;
  run = Quark("quantize" + model);
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("--output or --eval"), std::string::npos) << run.output;
}

}  // namespace
}  // namespace quark
