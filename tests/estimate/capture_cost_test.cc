// The Hessian-based algorithms' captures (core/estimate/capture_cost.h): each input a quantized linear reads costs the
// layer's forward up to its first reader, the attention's scores once past them; routed experts one capture a kind.
#include "core/estimate/capture_cost.h"

#include <gtest/gtest.h>

#include "core/checkpoint/model_layout.h"

namespace quark::estimate {
namespace {

checkpoint::ModelConfig Parse(const std::string& json) {
  auto config = checkpoint::ParseModelConfig(json);
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *config : checkpoint::ModelConfig{};
}

// Llama-shaped with grouped KV heads: q and o 64 x 64, k and v 32 x 64, gate and up 96 x 64, down 64 x 96.
checkpoint::ModelConfig TinyLlama() {
  return Parse(R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
      "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512, "max_position_embeddings": 512,
      "rms_norm_eps": 1e-5})");
}

// Mixtral-shaped: the same attention, 8 experts of 96 x 64 (w1, w3) and 64 x 96 (w2), top-2.
checkpoint::ModelConfig TinyMixtral() {
  return Parse(R"({"model_type": "mixtral", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
      "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512, "max_position_embeddings": 512,
      "rms_norm_eps": 1e-5, "num_local_experts": 8, "num_experts_per_tok": 2})");
}

std::set<std::string> Quantized(const checkpoint::ModelConfig& config, bool (*keep)(const checkpoint::LinearSpec&)) {
  std::set<std::string> out;
  for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
    for (const checkpoint::LinearSpec& l : checkpoint::LayerLinears(config, layer)) {
      if (keep(l)) out.insert(checkpoint::LayerPrefix(config, layer) + l.relative_name);
    }
  }
  return out;
}

constexpr int64_t kSamples = 3, kSeq = 16;
constexpr double kTokens = kSamples * kSeq;
constexpr double kAttention = 4.0 * kSeq * kSeq * 64 * kSamples;  // one layer's scores over every sample

// Every linear quantized: q/k/v's input costs nothing; o_proj's the projections and the attention; gate/up's also o;
// down_proj's also gate and up. Two layers.
TEST(CaptureCostTest, EachInputRunsTheLayerUpToItsFirstReader) {
  const checkpoint::ModelConfig config = TinyLlama();
  const double qkv = 2.0 * kTokens * (64 * 64 + 2 * 32 * 64), o = 2.0 * kTokens * 64 * 64;
  const double gate_up = 2.0 * kTokens * 2 * 96 * 64;
  const double per_layer = (qkv + kAttention) + (qkv + o + kAttention) + (qkv + o + gate_up + kAttention);
  const auto all = [](const checkpoint::LinearSpec&) { return true; };
  EXPECT_DOUBLE_EQ(CaptureFlops(config, 2, Quantized(config, all), kSamples, kSeq, false), 2 * per_layer);
  // Only down_proj quantized: one capture a layer, the forward up to it.
  const auto down = [](const checkpoint::LinearSpec& l) { return l.relative_name == "mlp.down_proj"; };
  EXPECT_DOUBLE_EQ(CaptureFlops(config, 2, Quantized(config, down), kSamples, kSeq, false),
                   2 * (qkv + o + gate_up + kAttention));
  // Only q/k/v: their input is the layer's own, before any GEMM.
  const auto attention_inputs = [](const checkpoint::LinearSpec& l) { return l.input == "input_layernorm"; };
  EXPECT_DOUBLE_EQ(CaptureFlops(config, 2, Quantized(config, attention_inputs), kSamples, kSeq, false), 0.0);
  EXPECT_DOUBLE_EQ(CaptureFlops(config, 2, {}, kSamples, kSeq, false), 0.0);
}

// The experts' inputs are captured a projection of all experts at a time, the forward going on through the block
// (every routed linear at the top-k share): one capture for the experts' input, one for their act_fn. Streamed in
// groups, the experts' inputs are recorded from one forward stopped at the block instead, and each expert runs its
// first projections alone on its recorded calls for its act_fn input.
TEST(CaptureCostTest, RoutedExpertsAreCapturedOnceAKind) {
  const checkpoint::ModelConfig config = TinyMixtral();
  const double qkv = 2.0 * kTokens * (64 * 64 + 2 * 32 * 64), o = 2.0 * kTokens * 64 * 64;
  const double share = 2.0 / 8;
  const double routed = 8 * 2.0 * kTokens * 3 * 96 * 64 * share;  // w1, w3, w2 of every expert at the top-k share
  const double expert0_w1_w3 = 2.0 * kTokens * 2 * 96 * 64 * share;
  const auto experts = [](const checkpoint::LinearSpec& l) { return l.routed; };
  const double attention_part = qkv + o + kAttention;
  EXPECT_DOUBLE_EQ(CaptureFlops(config, 2, Quantized(config, experts), kSamples, kSeq, false),
                   2 * ((attention_part + routed) + (attention_part + expert0_w1_w3 + routed)));
  const double w1_w3 = 8 * 2.0 * kTokens * 2 * 96 * 64 * share;  // every expert's first projections on its calls
  EXPECT_DOUBLE_EQ(CaptureFlops(config, 2, Quantized(config, experts), kSamples, kSeq, true),
                   2 * (attention_part + w1_w3));
}

}  // namespace
}  // namespace quark::estimate
