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

TEST(LlamaCppRulesTest, RotationSmoothQuantAwqAndKQuantGptqMayPrecedeTheRulesTheRestAreRefusedByName) {
  EXPECT_EQ(PrecursorKind(RotationAlgo{}), LlamaCppPrecursor::kNoQuantizer);
  EXPECT_EQ(PrecursorKind(SmoothQuantAlgo{}), LlamaCppPrecursor::kNoQuantizer);
  EXPECT_EQ(PrecursorKind(AwqAlgo{}), LlamaCppPrecursor::kKQuantQuantizer);
  EXPECT_EQ(PrecursorKind(AutoSmoothQuantAlgo{}), LlamaCppPrecursor::kRefused);
  EXPECT_EQ(PrecursorKind(GptqAlgo{}), LlamaCppPrecursor::kKQuantRounding);
  GptqAlgo gptaq;
  gptaq.method = HessianMethod::kGptaq;
  EXPECT_EQ(PrecursorKind(gptaq), LlamaCppPrecursor::kRefused);
  EXPECT_EQ(PrecursorKind(AutoRoundAlgo{}), LlamaCppPrecursor::kRefused);

  const auto field = [](size_t i) { return "spec.algo_config[" + std::to_string(i) + "]"; };
  EXPECT_TRUE(
      CheckAlgorithmsBeforeLlamaCppRules({RotationAlgo{}, SmoothQuantAlgo{}, AwqAlgo{}}, field, "x", false).ok());
  EXPECT_TRUE(CheckAlgorithmsBeforeLlamaCppRules({}, field, "x", false).ok());
  EXPECT_TRUE(CheckAlgorithmsBeforeLlamaCppRules({RotationAlgo{}, GptqAlgo{}}, field, "x", true).ok());
  // Jobs do not run K-quant-aware GPTQ (its blocks are not in layer checkpoints): refused naming the entry.
  const absl::Status gptq = CheckAlgorithmsBeforeLlamaCppRules({RotationAlgo{}, AwqAlgo{}, GptqAlgo{}}, field,
                                                               "spec.preset or spec.config", false);
  EXPECT_EQ(gptq.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(gptq.message().find("spec.algo_config[2]: gptq needs spec.preset or spec.config in a job"),
            std::string::npos)
      << gptq.message();
  const absl::Status gptaq_status = CheckAlgorithmsBeforeLlamaCppRules({gptaq}, field, "x", true);
  EXPECT_NE(gptaq_status.message().find("spec.algo_config[0]: gptaq needs x"), std::string::npos)
      << gptaq_status.message();
  const absl::Status autoround = CheckAlgorithmsBeforeLlamaCppRules(
      {AutoRoundAlgo{}}, [](size_t) { return std::string("--quant-algo"); }, "--scheme or --config", true);
  EXPECT_NE(autoround.message().find("--quant-algo: autoround needs --scheme or --config"), std::string::npos)
      << autoround.message();

  EXPECT_TRUE(NeedsKQuantQuantizer({SmoothQuantAlgo{}, AwqAlgo{}}));
  EXPECT_FALSE(NeedsKQuantQuantizer({RotationAlgo{}, SmoothQuantAlgo{}}));
  EXPECT_TRUE(RoundsToKQuants({RotationAlgo{}, GptqAlgo{}}));
  EXPECT_FALSE(RoundsToKQuants({gptaq, AwqAlgo{}}));
}

}  // namespace
}  // namespace quark
