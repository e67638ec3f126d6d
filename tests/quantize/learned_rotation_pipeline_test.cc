// #35 item 4: a trainable rotation entry through QuantizeModel on tinyllama-a. The pipeline trains R1 and R2
// (Cayley SGD, a few steps) on the job's calibration windows before it builds the rotated model; the HF-quark export
// reloads to the quantized model it evaluated, and that model differs from the Hadamard run's (the training ran and
// its rotation was folded). The fold keeping the float model is learned_rotation_test's (logits within 1e-4).
// Mixed schemes and a budget below the trainer's estimate are refused naming the entry's field.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/config/presets.h"
#include "core/export/hf_quark_checker.h"
#include "core/quantize/quantize_model.h"
#include "tests/quantize/test_model.h"

namespace quark {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kSteps = 8;

RotationAlgo Trainable() {
  RotationAlgo r;
  r.trainable = true;
  r.max_steps = kSteps;
  return r;
}

QuantizeModelOptions Options(const AlgoConfig& rotation, const std::string& output) {
  QuantizeModelOptions o;
  o.config = PresetConfig("uint4_wo_128").value();
  o.config.algo_config = {rotation};
  o.calibration_file = testing::FixturePath("eval/tinystories_train_split.txt");
  o.num_calibration_samples = 4;
  o.seq_len = 128;
  o.eval_text_file = testing::FixturePath("eval/tinystories_heldout_split.txt");
  o.eval_seq_len = 128;
  o.eval_max_windows = 4;
  o.output_dir = output;
  std::filesystem::remove_all(output);
  return o;
}

std::string Model() { return testing::FixturePath("tinyllama-a"); }

TEST(LearnedRotationPipelineTest, TrainsFoldsExportsAndReloads) {
  const std::string hadamard_dir = testing::TempPath("learned_rotation_hadamard");
  auto hadamard = QuantizeModel(Model(), Options(RotationAlgo{}, hadamard_dir));
  ASSERT_TRUE(hadamard.ok()) << hadamard.status();
  EXPECT_EQ(hadamard->metrics.count("rotation_loss_first"), 0u);

  const std::string learned_dir = testing::TempPath("learned_rotation_trained");
  QuantizeModelOptions options = Options(Trainable(), learned_dir);
  std::vector<std::string> messages;
  options.on_progress = [&](const QuantizeProgress& p) { messages.push_back(p.phase + ": " + p.message); };
  auto learned = QuantizeModel(Model(), options);
  ASSERT_TRUE(learned.ok()) << learned.status();

  // The training ran, on the calibration windows, with its progress and its log line.
  EXPECT_THAT(messages, ::testing::Contains(HasSubstr("rotation: algo_config[0]: training R1 and R2")));
  EXPECT_THAT(messages, ::testing::Contains(HasSubstr("rotation step 8/8: loss")));
  ASSERT_EQ(learned->metrics.count("rotation_loss_first"), 1u);
  EXPECT_THAT(learned->algorithm_log,
              ::testing::Contains(HasSubstr("algo_config[0] rotation: trained R1 and R2 for 8 steps")));
  std::cout << "quantized loss " << learned->metrics.at("rotation_loss_first") << " -> "
            << learned->metrics.at("rotation_loss_last") << "; ppl float " << learned->metrics.at("ppl_before")
            << ", hadamard " << hadamard->metrics.at("ppl_after") << ", learned " << learned->metrics.at("ppl_after")
            << ", learned reloaded " << learned->metrics.at("ppl_reloaded") << "\n";

  // Same float model, another quantized one: the trained rotation was folded, not the Hadamard start.
  EXPECT_EQ(learned->metrics.at("ppl_before"), hadamard->metrics.at("ppl_before"));
  EXPECT_GT(std::abs(learned->metrics.at("ppl_after") - hadamard->metrics.at("ppl_after")), 1e-4);
  // The export is the model the run evaluated.
  auto check = exporter::CheckHfQuarkExport(learned_dir);
  EXPECT_TRUE(check.ok()) << check;
  EXPECT_NEAR(learned->metrics.at("ppl_reloaded"), learned->metrics.at("ppl_after"),
              1e-3 * learned->metrics.at("ppl_after"));
  // Its quantization_config records the entry as it ran.
  std::ifstream config_file(std::filesystem::path(learned_dir) / "config.json");
  const auto config = nlohmann::json::parse(config_file);
  const auto& entry = config["quantization_config"]["algo_config"][0];
  EXPECT_EQ(entry["name"], "rotation");
  EXPECT_EQ(entry["trainable"], true);
  EXPECT_EQ(entry["max_steps"], kSteps);
  std::filesystem::remove_all(hadamard_dir);
  std::filesystem::remove_all(learned_dir);
}

TEST(LearnedRotationPipelineTest, BudgetBelowTheEstimateIsRefusedNamingTheField) {
  RotationAlgo r = Trainable();
  r.max_memory_bytes = 1 << 20;  // tinyllama-a needs ~95 MiB
  const std::string out = testing::TempPath("learned_rotation_budget");
  std::vector<std::string> phases;
  QuantizeModelOptions options = Options(r, out);
  options.on_progress = [&](const QuantizeProgress& p) { phases.push_back(p.phase); };
  auto refused = QuantizeModel(Model(), options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("algo_config[0].max_memory_bytes"));
  // Refused before the float evaluation and the layers: nothing ran.
  EXPECT_THAT(phases, ::testing::Not(::testing::Contains("evaluate_float")));
  std::filesystem::remove_all(out);
}

TEST(LearnedRotationPipelineTest, MixedSchemesAreRefusedNamingTheEntry) {
  QuantizeModelOptions options = Options(Trainable(), testing::TempPath("learned_rotation_mixed"));
  options.config.exclude.push_back("*.layers.1.mlp.down_proj");
  auto refused = QuantizeModel(Model(), options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(refused.status().message(), HasSubstr("algo_config[0].trainable"));
  EXPECT_THAT(refused.status().message(), HasSubstr("model.layers.1.mlp.down_proj"));
  std::filesystem::remove_all(options.output_dir);
}

}  // namespace
}  // namespace quark
