// Greedy generation with a KV cache: every step's logits against the full forward recomputed without the cache
// (the layer streamer over the whole sequence), on stories260K and tinyllama-a; a hook's edits seen by both paths;
// lm-eval's stop sequences, max_gen_toks and left truncation; the memory budget's refusal.
#include <gtest/gtest.h>

#include "core/eval/generation_task.h"
#include "core/eval/greedy_generation.h"
#include "core/eval/kv_cache_decoder.h"
#include "core/runtime/layer_streamer.h"
#include "core/runtime/llama_layer.h"
#include "core/runtime/tokenizer.h"
#include "tests/runtime/test_paths.h"

namespace quark::eval {
namespace {

std::string TinyllamaA() { return runtime::testing::SharedDir() + "/fixtures/tinyllama-a"; }

struct Opened {
  std::unique_ptr<runtime::LayerStreamer> streamer;
  std::unique_ptr<runtime::Tokenizer> tokenizer;
};

Opened Open(const std::string& dir) {
  runtime::testing::InitTestEngine();
  Opened m;
  auto streamer = runtime::LayerStreamer::Open(dir);
  EXPECT_TRUE(streamer.ok()) << streamer.status();
  m.streamer = *std::move(streamer);
  auto tokenizer = runtime::Tokenizer::Open(dir, m.streamer->config().bos_token_id, m.streamer->config().eos_token_id);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  m.tokenizer = *std::move(tokenizer);
  return m;
}

// The logits of the last token of `ids`, recomputed from scratch through every layer.
at::Tensor FullForwardLastLogits(runtime::LayerStreamer& streamer, const std::vector<int64_t>& ids,
                                 const runtime::LayerHooks& hooks) {
  auto hidden = streamer.Run({at::tensor(ids, at::kLong).unsqueeze(0)}, hooks);
  EXPECT_TRUE(hidden.ok()) << hidden.status();
  const at::Tensor& h = (*hidden)[0];
  auto logits = streamer.model().Logits(h.narrow(1, h.size(1) - 1, 1));
  EXPECT_TRUE(logits.ok()) << logits.status();
  return logits->reshape({-1}).to(at::kFloat);
}

// Generates `steps` tokens greedily with the cache (the prompt fed in two pieces) and checks each step's logits and
// argmax against the full forward. Returns the largest logit difference relative to the step's largest |logit| (at
// least 1): float32 sums in other orders (one row against T rows through the same GEMMs) differ in the last bits.
double CheckCachedSteps(const std::string& dir, int steps, const runtime::LayerHooks& hooks = {}) {
  Opened m = Open(dir);
  auto decoder = KvCacheDecoder::Load(*m.streamer, hooks, {});
  EXPECT_TRUE(decoder.ok()) << decoder.status();
  auto prompt = m.tokenizer->EncodeWithBos("Once upon a time, there was a little girl named Lily. She");
  EXPECT_TRUE(prompt.ok());
  std::vector<int64_t> ids = *prompt;
  const std::vector<int64_t> head(ids.begin(), ids.begin() + 3), rest(ids.begin() + 3, ids.end());
  EXPECT_TRUE((*decoder)->Append(head).ok());
  auto logits = (*decoder)->Append(rest);
  double worst = 0;
  for (int step = 0; step < steps && logits.ok(); ++step) {
    const at::Tensor full = FullForwardLastLogits(*m.streamer, ids, hooks);
    const double scale = std::max(1.0, full.abs().max().item<double>());
    worst = std::max(worst, (*logits - full).abs().max().item<double>() / scale);
    const int64_t token = logits->argmax().item<int64_t>();
    EXPECT_EQ(token, full.argmax().item<int64_t>()) << dir << " step " << step;
    ids.push_back(token);
    logits = (*decoder)->Append({token});
  }
  EXPECT_TRUE(logits.ok()) << logits.status();
  EXPECT_EQ((*decoder)->length(), static_cast<int64_t>(ids.size()));
  return worst;
}

TEST(KvCacheDecoderTest, EveryStepEqualsTheFullForwardStories260K) {
  const double worst = CheckCachedSteps(runtime::testing::Stories260K(), 40);
  EXPECT_LE(worst, 1e-5);
  std::printf("stories260K: largest |cached - full| / max(1, |logit|) over 40 steps: %.3g\n", worst);
}

TEST(KvCacheDecoderTest, EveryStepEqualsTheFullForwardTinyllamaA) {
  const double worst = CheckCachedSteps(TinyllamaA(), 24);
  EXPECT_LE(worst, 1e-5);
  std::printf("tinyllama-a: largest |cached - full| / max(1, |logit|) over 24 steps: %.3g\n", worst);
}

TEST(KvCacheDecoderTest, HooksEditTheLayersAsTheStreamerDoes) {
  // An export read back installs its quantized linears in `before`; here every post-attention norm is scaled.
  runtime::LayerHooks hooks;
  hooks.before = [](int64_t, runtime::DecoderLayer& layer, const std::vector<at::Tensor>&) {
    auto& llama = dynamic_cast<runtime::LlamaDecoderLayer&>(layer);
    llama.post_attention_layernorm->set_weight(llama.post_attention_layernorm->weight() * 1.75);
    return absl::OkStatus();
  };
  EXPECT_LE(CheckCachedSteps(runtime::testing::Stories260K(), 12, hooks), 1e-5);
  Opened m = Open(runtime::testing::Stories260K());
  auto plain = KvCacheDecoder::Load(*m.streamer, {}, {});
  auto edited = KvCacheDecoder::Load(*m.streamer, hooks, {});
  ASSERT_TRUE(plain.ok() && edited.ok());
  const auto a = (*plain)->Append({1, 400, 300});
  const auto b = (*edited)->Append({1, 400, 300});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_GT((*a - *b).abs().max().item<double>(), 1e-3);  // the hook did change the model
}

TEST(KvCacheDecoderTest, RefusesABudgetTooSmallAndACacheOverrun) {
  Opened m = Open(TinyllamaA());
  KvCacheOptions options;
  options.max_tokens = 512;
  options.memory_budget = 1000;
  auto refused = KvCacheDecoder::Load(*m.streamer, {}, options);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  const int64_t need = KvCacheDecoderBytes(m.streamer->config(), at::kFloat, 512);
  // 4 layers of (2 * 256 * 256 + 2 * 256 * 128 + 3 * 256 * 768 + 2 * 256 floats) + 4 * 2 * 128 * 512 cached floats.
  EXPECT_EQ(need, 4 * (4 * (2 * 256 * 256 + 2 * 256 * 128 + 3 * 256 * 768 + 2 * 256) + 4 * 2 * 128 * 512));
  EXPECT_NE(refused.status().message().find(std::to_string(need) + " bytes, over the memory budget of 1000 bytes"),
            std::string::npos)
      << refused.status();
  options.memory_budget = need;
  options.max_tokens = 4;
  auto decoder = KvCacheDecoder::Load(*m.streamer, {}, options);
  ASSERT_TRUE(decoder.ok()) << decoder.status();
  ASSERT_TRUE((*decoder)->Append({1, 5, 6}).ok());
  EXPECT_EQ((*decoder)->Append({7, 8}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*decoder)->Append({}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(GreedyGenerationTest, StopsAtAStopSequenceAndCutsIt) {
  Opened m = Open(runtime::testing::Stories260K());
  auto decoder = KvCacheDecoder::Load(*m.streamer, {}, {512, 0});
  ASSERT_TRUE(decoder.ok()) << decoder.status();
  GenerationRequest request{"Once upon a time", {}, 30};
  auto free_run = GenerateUntil(**decoder, *m.tokenizer, request, 512);
  ASSERT_TRUE(free_run.ok()) << free_run.status();
  ASSERT_EQ(free_run->tokens.size(), 30u);  // no stop: max_gen_toks
  std::printf("stories260K greedy: \"%s\"\n", free_run->text.c_str());
  // Stop at the text's fifth character onwards: the generation ends as soon as the stop appears, and is cut there.
  const std::string stop = free_run->text.substr(4, 3);
  request.until = {"never appears", stop};
  auto stopped = GenerateUntil(**decoder, *m.tokenizer, request, 512);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_EQ(stopped->text, free_run->text.substr(0, free_run->text.find(stop)));
  EXPECT_LT(stopped->tokens.size(), free_run->tokens.size());
  EXPECT_EQ(std::vector<int64_t>(free_run->tokens.begin(), free_run->tokens.begin() + stopped->tokens.size()),
            stopped->tokens);
  // Left truncation to max_length - max_gen_toks, as lm-eval's generate_until.
  auto decoder16 = KvCacheDecoder::Load(*m.streamer, {}, {16, 0});
  ASSERT_TRUE(decoder16.ok());
  auto truncated = GenerateUntil(**decoder16, *m.tokenizer, {"Once upon a time, there was a little girl", {}, 6}, 16);
  ASSERT_TRUE(truncated.ok()) << truncated.status();
  EXPECT_TRUE(truncated->truncated);
  EXPECT_EQ(truncated->context_tokens, 10);
  EXPECT_EQ(GenerateUntil(**decoder16, *m.tokenizer, {"x", {}, 16}, 16).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CutAtStopSequences("a Question: b</s>", {"Question:", "</s>", ""}), "a ");
}

}  // namespace
}  // namespace quark::eval
