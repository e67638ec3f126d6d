// Rotation (R1 + R2) as a view of the weights: the rotated float model is the same function (perplexity within 1e-4
// on the trained fixture and on a tied-embedding model), norms become 1, tied embeddings are untied, sizes without a
// Hadamard matrix need the random option, and rotation composes with GPTQ through QuantizeModel (export reloads to
// the fake-quantized model).
#include "core/algorithms/rotation.h"

#include <filesystem>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/model_layout.h"
#include "core/config/presets.h"
#include "core/quantize/quantize_model.h"
#include "core/runtime/layer_streamer.h"
#include "core/runtime/perplexity.h"
#include "core/runtime/tokenizer.h"
#include "tests/quantize/test_model.h"

namespace quark::algorithms {
namespace {

std::shared_ptr<runtime::CheckpointWeightSource> Weights(const std::string& dir) {
  auto reader = checkpoint::CheckpointReader::Open(dir);
  EXPECT_TRUE(reader.ok()) << reader.status();
  return std::make_shared<runtime::CheckpointWeightSource>(
      std::shared_ptr<const checkpoint::CheckpointReader>(*std::move(reader)));
}

double Perplexity(runtime::LayerStreamer& streamer, const std::vector<int64_t>& ids) {
  runtime::PerplexityOptions options;
  options.seq_len = 128;
  options.max_windows = 3;
  auto result = runtime::EvaluatePerplexity(streamer, ids, options);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? result->ppl : 0;
}

std::vector<int64_t> HeldOutIds(const std::string& model_dir, const checkpoint::ModelConfig& model) {
  auto tokenizer = runtime::Tokenizer::Open(model_dir, model.bos_token_id, model.eos_token_id);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  auto text = runtime::ReadTextFile(testing::SmallEvalText(4000));
  EXPECT_TRUE(text.ok()) << text.status();
  auto ids = (*tokenizer)->EncodeWithBos(*text);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return *ids;
}

void ExpectSameFunction(const std::string& dir, const RotationOptions& options) {
  auto model = checkpoint::LoadModelConfig(dir);
  ASSERT_TRUE(model.ok()) << model.status();
  auto original = runtime::LayerStreamer::Open(dir);
  ASSERT_TRUE(original.ok()) << original.status();
  auto rotated = RotatedWeightSource::Create(Weights(dir), *model, options, "algo_config[0]");
  ASSERT_TRUE(rotated.ok()) << rotated.status();
  EXPECT_FALSE((*rotated)->model().tie_word_embeddings);
  auto streamer = runtime::LayerStreamer::Create((*rotated)->model(), *rotated);
  ASSERT_TRUE(streamer.ok()) << streamer.status();
  const std::vector<int64_t> ids = HeldOutIds(dir, *model);
  const double before = Perplexity(**original, ids), after = Perplexity(**streamer, ids);
  EXPECT_NEAR(after, before, 1e-4 * before) << dir;
  // The norms carry nothing any more: they were folded into the linears.
  auto norm = (*rotated)->Get(checkpoint::LayerPrefix(*model, 0) + "input_layernorm.weight", at::kFloat);
  ASSERT_TRUE(norm.ok());
  EXPECT_TRUE(at::equal(*norm, at::ones_like(*norm)));
  EXPECT_TRUE((*rotated)->Has("lm_head.weight"));
}

TEST(RotationTest, RotatedTrainedModelIsTheSameFunction) {
  ExpectSameFunction(testing::FixturePath("tinyllama-a"), {});
  RotationOptions randomized;
  randomized.random = true;
  randomized.seed = 3;
  ExpectSameFunction(testing::FixturePath("tinyllama-a"), randomized);
}

TEST(RotationTest, TiedEmbeddingsAreUntiedAndStillTheSameFunction) {
  // stories260K: tied embeddings, hidden 64, head_dim 8.
  ExpectSameFunction(testing::FixturePath("stories260K"), {});
}

TEST(RotationTest, SizesWithoutHadamardNeedTheRandomOption) {
  testing::SyntheticLlamaOptions make;
  make.hidden = 92;  // 92 has no Hadamard construction here; head_dim 46 none at all (not a multiple of 4)
  make.heads = 2;
  make.kv_heads = 1;
  make.intermediate = 128;
  const std::string dir = testing::WriteSyntheticLlama(make);
  auto model = checkpoint::LoadModelConfig(dir);
  ASSERT_TRUE(model.ok());
  auto refused = RotatedWeightSource::Create(Weights(dir), *model, {}, "algo_config[0]");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(refused.status().message()).find("algo_config[0] (R1, hidden_size): no Hadamard matrix of order 92"),
            std::string::npos)
      << refused.status();
  RotationOptions random;
  random.random = true;
  ExpectSameFunction(dir, random);
}

QuantizeModelOptions RotationRun(const std::string& preset, std::vector<AlgoConfig> algos) {
  QuantizeModelOptions o;
  o.config = *PresetConfig(preset);
  o.config.algo_config = std::move(algos);
  o.calibration_file = testing::SmallEvalText();
  o.num_calibration_samples = 4;
  o.seq_len = 32;
  o.eval_text_file = testing::SmallEvalText();
  o.eval_seq_len = 64;
  o.eval_max_windows = 2;
  return o;
}

TEST(RotationPipelineTest, RotationThenGptqExportsAnOrdinaryModel) {
  // stories260K: tied embeddings, a 172-wide down_proj (per-tensor int8, which any width takes).
  QuantizeModelOptions o = RotationRun("w_int8_a_int8_per_tensor_sym", {RotationAlgo{}, GptqAlgo{}});
  o.output_dir = testing::TempPath("rotation_gptq");
  auto report = QuantizeModel(testing::FixturePath("stories260K"), o);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_NEAR(report->metrics.at("ppl_after"), report->metrics.at("ppl_reloaded"), 3e-5 * report->metrics.at("ppl_after"));
  std::ifstream in(std::filesystem::path(o.output_dir) / "config.json");
  const auto config = nlohmann::json::parse(in);
  EXPECT_EQ(config.at("tie_word_embeddings"), false);
  EXPECT_EQ(config.at("quantization_config").at("algo_config")[0].at("name"), "rotation");
  auto reader = checkpoint::CheckpointReader::Open(o.output_dir);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_TRUE((*reader)->Get("lm_head.weight").ok());
}

TEST(RotationPipelineTest, RotationMustComeFirst) {
  QuantizeModelOptions o = RotationRun("uint4_wo_32", {GptqAlgo{}, RotationAlgo{}});
  auto report = QuantizeModel(testing::WriteSyntheticLlama(), o);
  ASSERT_FALSE(report.ok());
  EXPECT_NE(std::string(report.status().message()).find("algo_config[1]: rotation must be the first"),
            std::string::npos)
      << report.status();
}

}  // namespace
}  // namespace quark::algorithms
