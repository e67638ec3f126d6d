// Resume from the last finished layer (#17): a run that stops after layer k (its checkpoint says k layers) and is
// started again restores layers 0..k-1 from the checkpoint and writes exports byte-identical to an uninterrupted
// run's, with the same evaluation figures: RTN (weight-only and static activations), GPTQ, AWQ, rotation, and AWQ
// then GPTQ into all three export formats in one pass. A checkpoint of other inputs or a damaged one is discarded
// and the run starts over. The kill -9 of the real quark-worker is in tests/worker/resume_e2e_test.cc.
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/checkpoint/checkpoint_reader.h"
#include "core/config/presets.h"
#include "core/quantize/quantize_model.h"
#include "tests/quantize/scenario_run.h"
#include "tests/quantize/test_model.h"

namespace quark {
namespace {

namespace fs = std::filesystem;
using testing::FilesUnder;
using testing::ReadBytes;
using testing::Scenario;

void SetFinishedLayers(const std::string& checkpoint_dir, int64_t layers) {
  const fs::path path = fs::path(checkpoint_dir) / "state.json";
  nlohmann::json state = nlohmann::json::parse(ReadBytes(path));
  state["finished_layers"] = layers;
  std::ofstream(path, std::ios::trunc) << state.dump();
}

class ResumeTest : public ::testing::TestWithParam<Scenario> {
 protected:
  static void SetUpTestSuite() {
    testing::SyntheticLlamaOptions model;
    model.hidden = 128;  // group size 128 divides every input dimension
    model.intermediate = 256;
    model.heads = 4;
    model.kv_heads = 2;
    model.layers = 4;
    model_dir_ = new std::string(testing::WriteSyntheticLlama(model));
    text_ = new std::string(testing::SmallEvalText());
  }

  QuantizeModelOptions Options(const std::string& output, const std::string& checkpoint,
                               std::vector<std::string>* messages = nullptr) const {
    QuantizeModelOptions o = testing::ScenarioOptions(GetParam(), *text_, output, checkpoint);
    if (messages) o.on_progress = [messages](const QuantizeProgress& p) { messages->push_back(p.message); };
    return o;
  }

  static std::string* model_dir_;
  static std::string* text_;
};
std::string* ResumeTest::model_dir_ = nullptr;
std::string* ResumeTest::text_ = nullptr;

bool AnyContains(const std::vector<std::string>& lines, const std::string& text) {
  for (const auto& line : lines) {
    if (line.find(text) != std::string::npos) return true;
  }
  return false;
}

bool RoundsOnTheGrid(const Scenario& scenario) {
  for (const auto& algo : scenario.algos) {
    if (std::holds_alternative<GptqAlgo>(algo) || std::holds_alternative<AutoRoundAlgo>(algo)) return true;
  }
  return false;
}

// GPTQ's (and AutoRound's) weights lie on their grid: the checkpoint keeps their codes (a quarter of float32's bytes for 4-bit
// weights), never the float weights; every other scenario's linear weights are not there at all or stay float.
void ExpectGptqWeightsStoredAsCodes(const std::string& checkpoint, const Scenario& scenario) {
  auto reader = checkpoint::CheckpointReader::OpenFile((fs::path(checkpoint) / "layer-00000" / "model.safetensors").string());
  ASSERT_TRUE(reader.ok()) << reader.status();
  int codes = 0, float_linear_weights = 0;
  for (const std::string& name : (*reader)->Names()) {
    const bool linear_weight = name.find("_proj.weight") != std::string::npos;
    if (name.rfind("grid/", 0) == 0 && name.size() > 6 && name.substr(name.size() - 6) == "/codes") ++codes;
    if (name.rfind("tensor/", 0) == 0 && linear_weight) ++float_linear_weights;
  }
  if (RoundsOnTheGrid(scenario)) {
    EXPECT_EQ(codes, 7) << "q, k, v, o, gate, up, down as codes";
    EXPECT_EQ(float_linear_weights, 0);
  } else {
    EXPECT_EQ(codes, 0);
  }
}

// #35 AutoRound with few iterations (the resume machinery is the same at 200).
AutoRoundAlgo ShortAutoRound() {
  AutoRoundAlgo a;
  a.iters = 8;
  a.batch_size = 2;
  return a;
}

// #35 item 4: a trainable rotation with few steps. Retrained on resume (deterministic for the same inputs), it folds
// into the layers still to quantize the rotation the restored layers were quantized with.
RotationAlgo ShortLearnedRotation() {
  RotationAlgo r;
  r.trainable = true;
  r.max_steps = 4;
  return r;
}

TEST_P(ResumeTest, ResumedRunWritesTheUninterruptedRunsBytes) {
  const std::string uninterrupted = testing::TempPath("resume_a");
  auto a = QuantizeModel(*model_dir_, Options(uninterrupted, ""));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->metrics.count("resumed_at_layer"), 0u);

  // A run with checkpoints: the same bytes, and every layer recorded.
  const std::string output = testing::TempPath("resume_b"), checkpoint = testing::TempPath("resume_ckpt");
  auto b = QuantizeModel(*model_dir_, Options(output, checkpoint));
  ASSERT_TRUE(b.ok()) << b.status();
  const auto expected = FilesUnder(uninterrupted);
  EXPECT_EQ(FilesUnder(output), expected);
  EXPECT_EQ(nlohmann::json::parse(ReadBytes(fs::path(checkpoint) / "state.json"))["finished_layers"], 4);
  ExpectGptqWeightsStoredAsCodes(checkpoint, GetParam());

  // As if killed after layer 2 mid-export: the state names 2 layers, output_dir holds a partial file.
  SetFinishedLayers(checkpoint, 2);
  std::ofstream(fs::path(output) / "partial.bin") << "half a shard";
  std::vector<std::string> messages;
  auto c = QuantizeModel(*model_dir_, Options(output, checkpoint, &messages));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->metrics.at("resumed_at_layer"), 2);
  EXPECT_TRUE(AnyContains(messages, "resumed at layer 2 of 4")) << GetParam().name;
  EXPECT_TRUE(AnyContains(messages, "restoring model.layers.1. from the checkpoint"));
  EXPECT_FALSE(AnyContains(messages, "restoring model.layers.2."));
  const auto resumed = FilesUnder(output);
  ASSERT_EQ(resumed.size(), expected.size());
  for (const auto& [file, bytes] : expected) {
    ASSERT_TRUE(resumed.count(file)) << file;
    EXPECT_TRUE(resumed.at(file) == bytes) << GetParam().name << ": " << file << " differs from the uninterrupted run's";
  }
  // The restored layers evaluate as the first run's did (same parameters and weights, bit for bit).
  for (const char* metric : {"ppl_before", "ppl_after", "ppl_reloaded", "ppl_compressed_tensors"}) {
    if (a->metrics.count(metric)) EXPECT_EQ(c->metrics.at(metric), a->metrics.at(metric)) << metric;
  }
  EXPECT_EQ(c->algorithm_log, a->algorithm_log);
}

// GPTAQ / Qronos (#35): a resumed run must move their float stream past the restored layers.
GptqAlgo Asymmetric(HessianMethod method, double alpha) {
  GptqAlgo a;
  a.method = method;
  a.alpha = alpha;
  return a;
}

INSTANTIATE_TEST_SUITE_P(
    Algorithms, ResumeTest,
    ::testing::Values(Scenario{"rtn_weight_only", "uint4_wo_128", {}, {}},
                      Scenario{"rtn_static_int8", "int8", {}, {}},
                      Scenario{"gptq", "uint4_wo_128", {GptqAlgo{}}, {}},
                      Scenario{"awq", "uint4_wo_128", {AwqAlgo{}}, {}},
                      Scenario{"awq_gptq_all_formats", "uint4_wo_32",
                               {AwqAlgo{}, GptqAlgo{}}, {"hf_quark", "gguf", "onnx"}},
                      Scenario{"rotation", "int4_wo_128", {RotationAlgo{}}, {}},
                      Scenario{"learned_rotation", "int4_wo_128", {ShortLearnedRotation()}, {}},
                      Scenario{"gptaq", "uint4_wo_128", {Asymmetric(HessianMethod::kGptaq, 0.25)}, {}},
                      Scenario{"qronos", "uint4_wo_128", {Asymmetric(HessianMethod::kQronos, 1e-3)}, {}},
                      Scenario{"autoround", "uint4_wo_32", {ShortAutoRound()}, {"hf_quark", "gguf"}},
                      Scenario{"imatrix_mse", "uint4_wo_32", {}, {"hf_quark", "compressed_tensors"},
                               ObserverKind::kImatrixMse}),
    [](const ::testing::TestParamInfo<Scenario>& info) { return info.param.name; });

class ResumeDiscardTest : public ResumeTest {};

TEST_P(ResumeDiscardTest, OtherInputsOrDamageStartOver) {
  const std::string output = testing::TempPath("discard_out"), checkpoint = testing::TempPath("discard_ckpt");
  auto first = QuantizeModel(*model_dir_, Options(output, checkpoint));
  ASSERT_TRUE(first.ok()) << first.status();
  const auto expected = FilesUnder(output);

  // A damaged layer file: found when the checkpoint is opened; the run starts over and still succeeds.
  SetFinishedLayers(checkpoint, 3);
  fs::resize_file(fs::path(checkpoint) / "layer-00001" / "model.safetensors", 10);
  fs::remove_all(output);
  std::vector<std::string> messages;
  auto damaged = QuantizeModel(*model_dir_, Options(output, checkpoint, &messages));
  ASSERT_TRUE(damaged.ok()) << damaged.status();
  EXPECT_EQ(damaged->metrics.count("resumed_at_layer"), 0u);
  EXPECT_TRUE(AnyContains(messages, "checkpoint discarded, starting at layer 0: layer 1:"));
  EXPECT_EQ(FilesUnder(output), expected);

  // Other calibration inputs (the seed picks other windows): the checkpoint is not this run's.
  SetFinishedLayers(checkpoint, 2);
  fs::remove_all(output);
  messages.clear();
  QuantizeModelOptions other = Options(output, checkpoint, &messages);
  other.seed = 43;
  auto reseeded = QuantizeModel(*model_dir_, other);
  ASSERT_TRUE(reseeded.ok()) << reseeded.status();
  EXPECT_EQ(reseeded->metrics.count("resumed_at_layer"), 0u);
  EXPECT_TRUE(AnyContains(messages, "checkpoint discarded, starting at layer 0: left by a run with other inputs"));
}

INSTANTIATE_TEST_SUITE_P(Gptq, ResumeDiscardTest,
                         ::testing::Values(Scenario{"gptq", "uint4_wo_128", {GptqAlgo{}}, {}}),
                         [](const ::testing::TestParamInfo<Scenario>& info) { return info.param.name; });

}  // namespace
}  // namespace quark
