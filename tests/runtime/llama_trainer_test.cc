// The in-process Llama trainer: its forward computes what the runtime computes (the saved checkpoint evaluated by
// EvaluatePerplexity agrees with the trainer's own evaluation to 1e-4 in mean NLL: tied and untied heads, GQA, other
// rope_theta and rope_scaling), training lowers held-out perplexity far below the random model's, a seed gives the
// same bytes, and bad options are refused by name.
#include "core/runtime/llama_trainer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/runtime/layer_streamer.h"
#include "core/runtime/perplexity.h"
#include "core/runtime/tokenizer.h"
#include "tests/runtime/test_paths.h"

namespace quark::runtime {
namespace {

namespace fs = std::filesystem;

class ScopedDir {
 public:
  explicit ScopedDir(const std::string& name)
      : path_(fs::temp_directory_path() / ("quark_trainer_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
  }
  ~ScopedDir() { fs::remove_all(path_); }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class LlamaTrainerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    testing::InitTestEngine();
    auto tokenizer = Tokenizer::Open(testing::Stories260K(), 1, 2);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    auto text = ReadTextFile(testing::TinyStoriesText());
    ASSERT_TRUE(text.ok()) << text.status();
    // Training text: the first 60,000 characters; held out: 20,000 characters from 200,000 on.
    auto train = (*tokenizer)->EncodeWithBos(text->substr(0, 60000));
    auto held_out = (*tokenizer)->EncodeWithBos(text->substr(200000, 20000));
    ASSERT_TRUE(train.ok() && held_out.ok());
    train_ids_ = new std::vector<int64_t>(*std::move(train));
    held_out_ids_ = new std::vector<int64_t>(*std::move(held_out));
  }
  static void TearDownTestSuite() {
    delete train_ids_;
    delete held_out_ids_;
  }

  static checkpoint::ModelConfig TinyConfig() {
    auto config = SyntheticConfig("llama", "tiny", "f32");  // hidden 64, 2 layers, 8/4 heads, tied, vocab 512
    EXPECT_TRUE(config.ok());
    return *config;
  }

  static LlamaTrainingOptions Short(int64_t steps) {
    LlamaTrainingOptions options;
    options.steps = steps;
    options.seq_len = 64;
    options.batch = 8;
    options.lr = 5e-3;
    return options;
  }

  // Saves the trainer's model as f32 and returns the runtime's evaluation of `ids` next to the trainer's own.
  static void ExpectRuntimeAgrees(LlamaTrainer& trainer, const std::vector<int64_t>& ids, const std::string& name) {
    ScopedDir dir(name);
    ASSERT_TRUE(trainer.Save(dir.str(), "f32").ok());
    auto streamer = LayerStreamer::Open(dir.str());
    ASSERT_TRUE(streamer.ok()) << streamer.status();
    PerplexityOptions options;
    options.seq_len = 64;
    options.max_windows = 12;
    auto runtime = EvaluatePerplexity(**streamer, ids, options);
    ASSERT_TRUE(runtime.ok()) << runtime.status();
    auto own = trainer.Evaluate(ids, options);
    ASSERT_TRUE(own.ok()) << own.status();
    EXPECT_EQ(runtime->windows, 12);
    EXPECT_EQ(own->windows, runtime->windows);
    EXPECT_NEAR(own->mean_nll, runtime->mean_nll, 1e-4) << name;
    for (size_t w = 0; w < own->window_nll.size(); ++w) EXPECT_NEAR(own->window_nll[w], runtime->window_nll[w], 1e-4) << w;
  }

  static std::vector<int64_t>* train_ids_;
  static std::vector<int64_t>* held_out_ids_;
};

std::vector<int64_t>* LlamaTrainerTest::train_ids_ = nullptr;
std::vector<int64_t>* LlamaTrainerTest::held_out_ids_ = nullptr;

TEST_F(LlamaTrainerTest, TrainingLowersHeldOutPerplexityAndTheRuntimeAgrees) {
  auto trainer = LlamaTrainer::Create(TinyConfig(), 3);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  PerplexityOptions eval;
  eval.seq_len = 64;
  eval.max_windows = 40;
  auto before = (*trainer)->Evaluate(*held_out_ids_, eval);
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_GT(before->ppl, 300.0);  // about the vocabulary's 512 for random weights
  std::vector<double> losses;
  ASSERT_TRUE((*trainer)->Train(*train_ids_, Short(400), [&](const TrainingProgress& p) { losses.push_back(p.loss); }).ok());
  ASSERT_EQ(losses.size(), 400u);
  EXPECT_LT(losses.back(), losses.front() - 2.0);
  auto after = (*trainer)->Evaluate(*held_out_ids_, eval);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_LT(after->ppl, before->ppl / 10) << "before " << before->ppl << ", after " << after->ppl;
  ExpectRuntimeAgrees(**trainer, *train_ids_, "tied_train");
  ExpectRuntimeAgrees(**trainer, *held_out_ids_, "tied_held_out");
}

TEST_F(LlamaTrainerTest, UntiedHeadGqaAndRopeVariantsAgreeWithTheRuntime) {
  checkpoint::ModelConfig config = TinyConfig();
  config.tie_word_embeddings = false;
  config.num_attention_heads = 4;  // head_dim 16, 4 query heads on 1 KV head
  config.num_key_value_heads = 1;
  config.head_dim = 16;
  config.rope_theta = 500000.0;
  auto trainer = LlamaTrainer::Create(config, 5);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  ASSERT_TRUE((*trainer)->Train(*train_ids_, Short(30)).ok());
  ExpectRuntimeAgrees(**trainer, *train_ids_, "untied");

  config.rope_scaling = checkpoint::RopeScaling{"llama3", 8.0, 1.0, 4.0, 32};
  auto scaled = LlamaTrainer::Create(config, 6);
  ASSERT_TRUE(scaled.ok()) << scaled.status();
  ASSERT_TRUE((*scaled)->Train(*train_ids_, Short(30)).ok());
  ExpectRuntimeAgrees(**scaled, *train_ids_, "llama3_scaling");
}

TEST_F(LlamaTrainerTest, ASeedGivesTheSameBytes) {
  std::string bytes[3];
  const uint64_t seeds[3] = {7, 7, 8};
  for (int i = 0; i < 3; ++i) {
    auto trainer = LlamaTrainer::Create(TinyConfig(), seeds[i]);
    ASSERT_TRUE(trainer.ok());
    LlamaTrainingOptions options = Short(5);
    options.seed = seeds[i];
    ASSERT_TRUE((*trainer)->Train(*train_ids_, options).ok());
    ScopedDir dir("seed" + std::to_string(i));
    ASSERT_TRUE((*trainer)->Save(dir.str(), "f32").ok());
    bytes[i] = ReadBytes(dir.str() + "/model.safetensors");
  }
  ASSERT_FALSE(bytes[0].empty());
  EXPECT_TRUE(bytes[0] == bytes[1]);
  EXPECT_FALSE(bytes[0] == bytes[2]);
}

TEST_F(LlamaTrainerTest, MakeTrainedModelWritesAFolderTheRuntimeReads) {
  ScopedDir text_dir("text");
  fs::create_directories(text_dir.str());
  const std::string text_path = text_dir.str() + "/train.txt";
  {
    auto text = ReadTextFile(testing::TinyStoriesText());
    ASSERT_TRUE(text.ok());
    std::ofstream(text_path) << text->substr(0, 20000);
  }
  ScopedDir out("folder");
  TrainedModelOptions options;
  options.model.shape = "tiny";
  options.model.dtype = "bf16";
  options.model.seed = 2;
  options.model.out_dir = out.str();
  options.model.tokenizer_path = testing::Stories260K() + "/tokenizer.model";
  options.text_path = text_path;
  options.hidden_size = 96;
  options.num_layers = 3;
  options.training = Short(10);
  auto report = MakeTrainedModel(options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_GT(report->text_tokens, 1000);
  EXPECT_TRUE(fs::exists(out.str() + "/tokenizer.model"));
  auto config = checkpoint::LoadModelConfig(out.str());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->hidden_size, 96);
  EXPECT_EQ(config->num_hidden_layers, 3);
  EXPECT_EQ(config->num_attention_heads, 3);
  EXPECT_EQ(config->num_key_value_heads, 3);
  EXPECT_EQ(config->intermediate_size, 256);
  EXPECT_EQ(config->torch_dtype, "bfloat16");
  auto streamer = LayerStreamer::Open(out.str());
  ASSERT_TRUE(streamer.ok()) << streamer.status();
  PerplexityOptions eval;
  eval.seq_len = 64;
  eval.max_windows = 4;
  auto ppl = EvaluatePerplexity(**streamer, *held_out_ids_, eval);
  ASSERT_TRUE(ppl.ok()) << ppl.status();
  EXPECT_TRUE(std::isfinite(ppl->ppl));
}

TEST_F(LlamaTrainerTest, BadOptionsAreRefusedByName) {
  auto trainer = LlamaTrainer::Create(TinyConfig(), 0);
  ASSERT_TRUE(trainer.ok());
  LlamaTrainingOptions options = Short(1);
  options.seq_len = 1024;  // above max_position_embeddings 512
  auto status = (*trainer)->Train(*train_ids_, options);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("seq_len"), std::string::npos) << status;
  options = Short(1);
  status = (*trainer)->Train(std::vector<int64_t>(30, 5), options);  // 30 tokens < 65
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("fewer than seq_len"), std::string::npos) << status;
  status = (*trainer)->Train(std::vector<int64_t>(100, 512), options);
  EXPECT_NE(status.message().find("token id 512"), std::string::npos) << status;
  options.steps = 0;
  EXPECT_EQ((*trainer)->Train(*train_ids_, options).code(), absl::StatusCode::kInvalidArgument);

  auto opt = SyntheticConfig("opt", "tiny", "f32");
  ASSERT_TRUE(opt.ok());
  EXPECT_EQ(LlamaTrainer::Create(*opt, 0).status().code(), absl::StatusCode::kInvalidArgument);
  TrainedModelOptions model_options;
  model_options.hidden_size = 100;
  auto config = TrainedModelConfig(model_options);
  EXPECT_NE(config.status().message().find("hidden_size: 100"), std::string::npos) << config.status();
  model_options.hidden_size = 0;
  model_options.model.arch = "mistral";
  EXPECT_NE(TrainedModelConfig(model_options).status().message().find("arch"), std::string::npos);
  model_options.model.arch = "llama";
  model_options.model.out_dir = "/tmp/unused";
  EXPECT_NE(MakeTrainedModel(model_options).status().message().find("tokenizer"), std::string::npos);
}

}  // namespace
}  // namespace quark::runtime
