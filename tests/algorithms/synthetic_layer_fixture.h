// Layer 0 of the synthetic Llama (GQA: 4 query heads over 2 KV heads) and embedded samples of random tokens: what the
// layer-algorithm tests (GPTQ, GPTAQ / Qronos, AWQ, SmoothQuant, AutoRound) run their algorithm on. A mixin beside
// ::testing::Test or TestWithParam: call OpenSyntheticLlama from SetUp inside ASSERT_NO_FATAL_FAILURE.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <vector>

#include "core/runtime/layer_streamer.h"
#include "tests/quantize/test_model.h"

namespace quark::testing {

class SyntheticLlamaLayer {
 protected:
  /// Writes and opens the synthetic Llama, seeds LibTorch's generator with `seed`, then embeds `count` samples of
  /// random tokens, sample i `tokens(i)` long.
  void OpenSyntheticLlama(uint64_t seed, int count, const std::function<int64_t(int)>& tokens) {
    auto streamer = runtime::LayerStreamer::Open(WriteSyntheticLlama());
    ASSERT_TRUE(streamer.ok()) << streamer.status();
    streamer_ = *std::move(streamer);
    at::manual_seed(seed);
    for (int i = 0; i < count; ++i) {
      auto embedded = streamer_->model().Embed(at::randint(0, 512, {1, tokens(i)}, at::kLong));
      ASSERT_TRUE(embedded.ok()) << embedded.status();
      samples_.push_back(*embedded);
    }
  }

  /// A fresh copy of layer 0 (the algorithms change the layer they are given).
  std::shared_ptr<runtime::DecoderLayer> Layer() {
    auto layer = streamer_->model().LoadLayer(0);
    EXPECT_TRUE(layer.ok()) << layer.status();
    return layer.ok() ? *layer : nullptr;
  }

  const runtime::LayerContext& Context(int64_t tokens) { return streamer_->model().Context(tokens); }

  /// `layer`'s forward with the model's context for the input's length.
  at::Tensor Forward(runtime::DecoderLayer& layer, const at::Tensor& x) { return layer.forward(x, Context(x.size(1))); }

  std::unique_ptr<runtime::LayerStreamer> streamer_;
  std::vector<at::Tensor> samples_;
};

}  // namespace quark::testing
