// `quark quantize --expert-group-size` (#32 item 5) as a user types it: a count or `auto`, anything else refused naming
// the flag; `auto` prints its choice against --memory-budget-gb, and refuses a budget below one expert at a time's
// estimate, or a model without routed experts, before any work.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/algorithms/cli_run.h"
#include "tests/quantize/test_model.h"

namespace quark::quantize {
namespace {

namespace fs = std::filesystem;
using quark::testing::Quark;

class ExpertGroupCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(quark::testing::QuarkBinary().empty()) << "QUARK_BINARY_DIR is not set";
    dir_ = quark::testing::TempPath("expert_group_cli");
    fs::remove_all(dir_);
    const auto made = Quark("make-model --arch qwen3_moe --shape tiny --dtype f32 --seed 21 --out " + Model());
    ASSERT_EQ(made.exit_code, 0) << made.output;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Model() const { return dir_ + "/model"; }
  // quantize uint4_wo_32 (no calibration needed) into a fresh folder with `flags`.
  quark::testing::CliRun Quantize(const std::string& model, const std::string& flags) {
    const std::string out = dir_ + "/out" + std::to_string(++runs_);
    return Quark("quantize --model " + model + " --scheme uint4_wo_32 --output " + out + " " + flags);
  }

  std::string dir_;
  int runs_ = 0;
};

TEST_F(ExpertGroupCliTest, ACountOrAutoAndAnythingElseIsRefusedNamingTheFlag) {
  const auto bad = Quantize(Model(), "--expert-group-size abc");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--expert-group-size: \"abc\" is neither a count >= 0 nor auto"), std::string::npos)
      << bad.output;
  const auto negative = Quantize(Model(), "--expert-group-size -3");
  EXPECT_NE(negative.exit_code, 0) << negative.output;
  EXPECT_EQ(Quantize(Model(), "--expert-group-size 2").exit_code, 0);
}

TEST_F(ExpertGroupCliTest, AutoPrintsItsChoiceAndRefusesABudgetBelowOneExpertAtATime) {
  const auto roomy = Quantize(Model(), "--expert-group-size auto --memory-budget-gb 1000");
  EXPECT_EQ(roomy.exit_code, 0) << roomy.output;
  EXPECT_NE(roomy.output.find("expert_group_size auto: 0, the whole layer fits"), std::string::npos) << roomy.output;
  const auto starved = Quantize(Model(), "--expert-group-size auto --memory-budget-gb 0.000001");
  EXPECT_NE(starved.exit_code, 0) << starved.output;
  EXPECT_NE(starved.output.find("even one routed expert at a time needs an estimated"), std::string::npos)
      << starved.output;
  EXPECT_NE(starved.output.find("memory budget is 0.00 GB"), std::string::npos) << starved.output;
  EXPECT_FALSE(fs::exists(dir_ + "/out2/model.safetensors")) << "work was done";
  const auto dense = Quantize(quark::testing::FixturePath("stories260K"), "--expert-group-size auto");
  EXPECT_EQ(dense.exit_code, 2) << dense.output;
  EXPECT_NE(dense.output.find("has no routed experts to stream"), std::string::npos) << dense.output;
}

}  // namespace
}  // namespace quark::quantize
