// Sliding-window attention (Mistral): the mask's exact band, and every forward path (whole model, layer
// streamer, perplexity) against the reference, which walks each query's allowed keys one by one.
#include <filesystem>
#include <fstream>
#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/runtime/attention.h"
#include "core/runtime/full_model.h"
#include "core/runtime/layer_streamer.h"
#include "core/runtime/perplexity.h"
#include "core/runtime/synthetic_model.h"
#include "tests/runtime/reference_model.h"
#include "tests/runtime/test_paths.h"

namespace quark::runtime {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kWindow = 4;
constexpr int64_t kSeq = 23;  // several windows long

std::vector<int64_t> WindowIds(int64_t n, int64_t vocab) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back((i * 7919 + 13) % vocab);
  return ids;
}

// Rewrites dir/config.json with `window` (0 = null), keeping the weights.
void SetWindow(const fs::path& dir, int64_t window) {
  checkpoint::ModelConfig config = checkpoint::LoadModelConfig(dir.string()).value();
  config.sliding_window = window;
  std::ofstream(dir / "config.json", std::ios::trunc) << checkpoint::ModelConfigToJson(config);
}

class SlidingWindowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::InitTestEngine();
    dir_ = fs::temp_directory_path() / ("quark_rt_mistral_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    SyntheticModelOptions options;
    options.arch = "mistral";
    options.dtype = "f32";
    options.seed = 11;
    options.out_dir = dir_.string();
    ASSERT_TRUE(MakeSyntheticModel(options).ok());
    SetWindow(dir_, kWindow);
  }
  void TearDown() override { fs::remove_all(dir_); }

  at::Tensor Ids() const { return at::tensor(WindowIds(kSeq, 512), at::kLong).unsqueeze(0); }

  fs::path dir_;
};

TEST(CausalMaskTest, WindowKeepsTheLastWindowKeysOfEachQuery) {
  for (int64_t window : {0, 1, 3, 6, 9}) {
    const int64_t t = 6;
    const at::Tensor mask = CausalMask(t, window);
    ASSERT_EQ(mask.sizes(), (std::vector<int64_t>{t, t}));
    for (int64_t i = 0; i < t; ++i) {
      for (int64_t j = 0; j < t; ++j) {
        const bool visible = j <= i && (window == 0 || j > i - window);
        const float expected = visible ? 0.0f : -std::numeric_limits<float>::infinity();
        EXPECT_EQ(mask[i][j].item<float>(), expected) << "window " << window << " i " << i << " j " << j;
      }
    }
  }
}

TEST_F(SlidingWindowTest, ConfigCarriesTheWindowToEveryLayer) {
  auto streamer = LayerStreamer::Open(dir_.string());
  ASSERT_TRUE(streamer.ok()) << streamer.status();
  EXPECT_EQ((*streamer)->config().model_type, "mistral");
  EXPECT_EQ((*streamer)->config().sliding_window, kWindow);
  const LayerContext& context = (*streamer)->model().Context(kSeq);
  EXPECT_EQ(context.sliding_window, kWindow);
  EXPECT_TRUE(at::equal(context.sliding_mask, CausalMask(kSeq, kWindow)));
}

TEST_F(SlidingWindowTest, StreamedAndWholeModelMatchTheWindowedReference) {
  const at::Tensor ids = Ids();
  const at::Tensor reference = testing::ReferenceLogits(dir_.string(), WindowIds(kSeq, 512));
  auto lm = CausalLm::Open(dir_.string());
  ASSERT_TRUE(lm.ok()) << lm.status();
  auto whole = (*lm)->Forward(ids);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_LT((whole->squeeze(0).to(at::kDouble) - reference).abs().max().item<double>(), 1e-4);

  auto streamer = LayerStreamer::Open(dir_.string());
  ASSERT_TRUE(streamer.ok()) << streamer.status();
  auto hidden = (*streamer)->Run({ids});
  ASSERT_TRUE(hidden.ok()) << hidden.status();
  auto streamed = (*streamer)->model().Logits((*hidden)[0]);
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  EXPECT_LT((streamed->squeeze(0).to(at::kDouble) - reference).abs().max().item<double>(), 1e-4);
}

TEST_F(SlidingWindowTest, WindowChangesOnlyPositionsPastTheWindow) {
  const at::Tensor ids = Ids();
  auto windowed = CausalLm::Open(dir_.string()).value()->Forward(ids).value().squeeze(0);
  SetWindow(dir_, 0);
  ASSERT_EQ(checkpoint::LoadModelConfig(dir_.string())->sliding_window, 0);
  auto full = CausalLm::Open(dir_.string()).value()->Forward(ids).value().squeeze(0);
  // The no-window run is itself the plain causal reference.
  const at::Tensor reference = testing::ReferenceLogits(dir_.string(), WindowIds(kSeq, 512));
  EXPECT_LT((full.to(at::kDouble) - reference).abs().max().item<double>(), 1e-4);
  // Positions 0 .. window-1 see every earlier token either way; later ones lose the oldest keys.
  EXPECT_TRUE(at::allclose(windowed.narrow(0, 0, kWindow), full.narrow(0, 0, kWindow), 1e-5, 1e-6));
  const at::Tensor past = (windowed.narrow(0, kWindow, kSeq - kWindow) - full.narrow(0, kWindow, kSeq - kWindow)).abs();
  EXPECT_GT(past.max().item<float>(), 1e-3);
  EXPECT_GT(past.amax(-1).min().item<float>(), 0.0f);  // every later position differs
}

TEST_F(SlidingWindowTest, PerplexityUsesTheWindow) {
  auto streamer = LayerStreamer::Open(dir_.string());
  ASSERT_TRUE(streamer.ok());
  PerplexityOptions options;
  options.seq_len = kSeq;
  const std::vector<int64_t> ids = WindowIds(kSeq, 512);
  auto result = EvaluatePerplexity(**streamer, ids, options);
  ASSERT_TRUE(result.ok()) << result.status();
  const at::Tensor log_probs = at::log_softmax(testing::ReferenceLogits(dir_.string(), ids), -1);
  double nll = 0;
  for (int64_t t = 0; t + 1 < kSeq; ++t) nll -= log_probs[t][ids[t + 1]].item<double>();
  EXPECT_NEAR(result->mean_nll, nll / (kSeq - 1), 1e-4);
}

TEST_F(SlidingWindowTest, LayerRefusesAContextBuiltWithoutItsWindow) {
  auto streamer = LayerStreamer::Open(dir_.string());
  ASSERT_TRUE(streamer.ok());
  auto layer = (*streamer)->model().LoadLayer(0);
  ASSERT_TRUE(layer.ok());
  LayerContext context = (*streamer)->model().Context(kSeq);
  context.sliding_window = 0;
  context.sliding_mask = at::Tensor();
  const at::Tensor hidden = at::randn({1, kSeq, 64});
  EXPECT_THROW((*layer)->forward(hidden, context), c10::Error);
}

}  // namespace
}  // namespace quark::runtime
