// A checkpoint carried to another machine (#34 item 1): with QuantizeModelOptions::checkpoint_identity the
// fingerprint names the model as the caller does everywhere, so a checkpoint written from one copy of the model, into
// one output folder, with the calibration text at one path, resumes from another copy, another output folder and
// another path of the same text, byte-identical; without it (local paths and mtimes), or with another identity, the
// checkpoint is discarded. on_layer_checkpointed follows every finished layer.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/quantize/quantize_model.h"
#include "tests/quantize/scenario_run.h"
#include "tests/quantize/test_model.h"

namespace quark {
namespace {

namespace fs = std::filesystem;
using testing::FilesUnder;
using testing::ReadBytes;

// One machine's view: its copy of the model and of the calibration text, its output and checkpoint folders.
struct Machine {
  std::string model, text, output, checkpoint;
};

Machine CopyTo(const std::string& name, const std::string& model, const std::string& text) {
  Machine m{testing::TempPath(name + "_model"), testing::TempPath(name + "_text"), testing::TempPath(name + "_out"),
            testing::TempPath(name + "_ckpt")};
  fs::remove_all(m.model);
  fs::copy(model, m.model, fs::copy_options::recursive);
  fs::remove_all(m.text);
  fs::copy_file(text, m.text);
  return m;
}

bool AnyContains(const std::vector<std::string>& lines, const std::string& text) {
  for (const auto& line : lines) {
    if (line.find(text) != std::string::npos) return true;
  }
  return false;
}

class PortableResumeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    testing::SyntheticLlamaOptions model;
    model.hidden = 128;
    model.intermediate = 256;
    model.heads = 4;
    model.kv_heads = 2;
    model.layers = 4;
    model_dir_ = new std::string(testing::WriteSyntheticLlama(model));
    text_ = new std::string(testing::TempPath("portable_text"));
    std::ofstream(*text_) << testing::ReadBytes(testing::SmallEvalText());
  }

  static QuantizeModelOptions Options(const Machine& m, const std::string& identity,
                                      std::vector<std::string>* messages) {
    QuantizeModelOptions o =
        testing::ScenarioOptions({"gptq", "uint4_wo_128", {GptqAlgo{}}, {}}, m.text, m.output, m.checkpoint);
    o.checkpoint_identity = identity;
    o.on_progress = [messages](const QuantizeProgress& p) { messages->push_back(p.message); };
    return o;
  }

  static std::string* model_dir_;
  static std::string* text_;
};
std::string* PortableResumeTest::model_dir_ = nullptr;
std::string* PortableResumeTest::text_ = nullptr;

TEST_F(PortableResumeTest, ACheckpointFromAnotherCopyResumesWithTheSameIdentityOnly) {
  const Machine a = CopyTo("portable_a", *model_dir_, *text_);
  std::vector<std::string> messages;
  std::vector<int64_t> checkpointed;
  QuantizeModelOptions first = Options(a, "s3://models/llama sizes etags", &messages);
  first.on_layer_checkpointed = [&](int64_t finished) {
    // Called once the layer is complete on disk: state.json names it already.
    const auto state = nlohmann::json::parse(ReadBytes(fs::path(a.checkpoint) / "state.json"));
    EXPECT_EQ(state["finished_layers"], finished);
    checkpointed.push_back(finished);
  };
  auto done = QuantizeModel(a.model, first);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(checkpointed, (std::vector<int64_t>{1, 2, 3, 4}));
  const auto expected = FilesUnder(a.output);

  // Another machine: its own copies (other paths, other mtimes), the first one's checkpoint as of layer 2.
  auto state = nlohmann::json::parse(ReadBytes(fs::path(a.checkpoint) / "state.json"));
  state["finished_layers"] = 2;
  std::ofstream(fs::path(a.checkpoint) / "state.json", std::ios::trunc) << state.dump();
  auto run_on = [&](const std::string& name, const std::string& identity) {
    const Machine b = CopyTo(name, *model_dir_, *text_);
    fs::remove_all(b.checkpoint);
    fs::copy(a.checkpoint, b.checkpoint, fs::copy_options::recursive);
    messages.clear();
    checkpointed.clear();
    QuantizeModelOptions options = Options(b, identity, &messages);
    options.on_layer_checkpointed = [&](int64_t finished) { checkpointed.push_back(finished); };
    auto report = QuantizeModel(b.model, options);
    EXPECT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(FilesUnder(b.output), expected) << name;
    return report.ok() ? report->metrics.count("resumed_at_layer") : 99u;
  };
  EXPECT_EQ(run_on("portable_b", "s3://models/llama sizes etags"), 1u);
  EXPECT_TRUE(AnyContains(messages, "resumed at layer 2 of 4"));
  EXPECT_EQ(checkpointed, (std::vector<int64_t>{3, 4})) << "restored layers are not checkpointed again";

  EXPECT_EQ(run_on("portable_c", ""), 0u) << "local fingerprints name the paths: no resume elsewhere";
  EXPECT_TRUE(AnyContains(messages, "checkpoint discarded, starting at layer 0: left by a run with other inputs"));
  EXPECT_EQ(run_on("portable_d", "s3://models/llama other etags"), 0u);
  EXPECT_TRUE(AnyContains(messages, "checkpoint discarded"));
}

}  // namespace
}  // namespace quark
