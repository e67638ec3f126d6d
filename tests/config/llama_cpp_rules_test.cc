// #37 item 4: the one predicate of what may run before llama.cpp's K-quant rules, which the CLI, the worker, quarkd's
// submit validation and the engine all call.
#include "core/config/llama_cpp_rules.h"

#include <gtest/gtest.h>

namespace quark {
namespace {

TEST(LlamaCppRulesTest, OnlyAGgufTypeWithoutASchemeAsTheOnlyExport) {
  EXPECT_TRUE(QuantizesByLlamaCppRules(false, "Q4_K_M", {"gguf"}));
  EXPECT_FALSE(QuantizesByLlamaCppRules(true, "Q4_K_M", {"gguf"}));  // the engine's codes + the mixture
  EXPECT_FALSE(QuantizesByLlamaCppRules(false, "", {"gguf"}));
  EXPECT_FALSE(QuantizesByLlamaCppRules(false, "Q4_K_M", {"gguf", "onnx"}));
  EXPECT_FALSE(QuantizesByLlamaCppRules(false, "Q4_K_M", {}));
}

TEST(LlamaCppRulesTest, RotationSmoothQuantAndAwqTransformTheFloatWeightsTheRestAreRefusedByName) {
  EXPECT_EQ(PrecursorKind(RotationAlgo{}), LlamaCppPrecursor::kNoQuantizer);
  EXPECT_EQ(PrecursorKind(SmoothQuantAlgo{}), LlamaCppPrecursor::kNoQuantizer);
  EXPECT_EQ(PrecursorKind(AwqAlgo{}), LlamaCppPrecursor::kKQuantQuantizer);
  EXPECT_EQ(PrecursorKind(AutoSmoothQuantAlgo{}), LlamaCppPrecursor::kRefused);
  EXPECT_EQ(PrecursorKind(GptqAlgo{}), LlamaCppPrecursor::kRefused);
  EXPECT_EQ(PrecursorKind(AutoRoundAlgo{}), LlamaCppPrecursor::kRefused);

  const auto field = [](size_t i) { return "spec.algo_config[" + std::to_string(i) + "]"; };
  EXPECT_TRUE(CheckAlgorithmsBeforeLlamaCppRules({RotationAlgo{}, SmoothQuantAlgo{}, AwqAlgo{}}, field, "x").ok());
  EXPECT_TRUE(CheckAlgorithmsBeforeLlamaCppRules({}, field, "x").ok());
  const absl::Status gptq =
      CheckAlgorithmsBeforeLlamaCppRules({RotationAlgo{}, AwqAlgo{}, GptqAlgo{}}, field, "spec.preset or spec.config");
  EXPECT_EQ(gptq.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(gptq.message().find("spec.algo_config[2]: gptq needs spec.preset or spec.config"), std::string::npos)
      << gptq.message();
  const absl::Status autoround = CheckAlgorithmsBeforeLlamaCppRules(
      {AutoRoundAlgo{}}, [](size_t) { return std::string("--quant-algo"); }, "--scheme or --config");
  EXPECT_NE(autoround.message().find("--quant-algo: autoround needs --scheme or --config"), std::string::npos)
      << autoround.message();

  EXPECT_TRUE(NeedsKQuantQuantizer({SmoothQuantAlgo{}, AwqAlgo{}}));
  EXPECT_FALSE(NeedsKQuantQuantizer({RotationAlgo{}, SmoothQuantAlgo{}}));
}

}  // namespace
}  // namespace quark
