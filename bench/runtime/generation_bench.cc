// Greedy decode speed with the KV cache (core/eval/kv_cache_decoder.h) against recomputing the whole sequence
// through every layer at each step (the layer streamer, no cache), and whether both pick the same tokens.
//
//   generation_bench --model DIR [--prompt-tokens 256] [--new-tokens 64] [--threads N]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/base/openmp_wait_policy.h"
#include "core/engine/engine_init.h"
#include "core/eval/kv_cache_decoder.h"
#include "core/runtime/layer_streamer.h"

namespace {

double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  quark::EnsurePassiveOpenMpWaits();  // OpenMP's idle threads sleep, as in quark and quark-worker
  std::string model;
  int64_t prompt_tokens = 256, new_tokens = 64, threads = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--model")) model = argv[i + 1];
    else if (!std::strcmp(argv[i], "--prompt-tokens")) prompt_tokens = std::stoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--new-tokens")) new_tokens = std::stoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--threads")) threads = std::stoll(argv[i + 1]);
  }
  if (model.empty() || prompt_tokens < 1 || new_tokens < 1) {
    std::fprintf(stderr, "usage: generation_bench --model DIR [--prompt-tokens N] [--new-tokens N] [--threads N]\n");
    return 2;
  }
  quark::EngineOptions engine;
  engine.intra_op_threads = static_cast<int>(threads);
  quark::InitEngine(engine);
  auto streamer = quark::runtime::LayerStreamer::Open(model);
  if (!streamer.ok()) {
    std::fprintf(stderr, "%s\n", std::string(streamer.status().message()).c_str());
    return 1;
  }
  const int64_t vocab = (*streamer)->config().vocab_size;
  std::vector<int64_t> prompt = {1};
  for (int64_t i = 1; i < prompt_tokens; ++i) prompt.push_back(3 + (i * 7919) % (vocab - 3));  // fixed, not random
  quark::eval::KvCacheOptions options;
  options.max_tokens = prompt_tokens + new_tokens;
  const auto load_start = std::chrono::steady_clock::now();
  auto decoder = quark::eval::KvCacheDecoder::Load(**streamer, {}, options);
  if (!decoder.ok()) {
    std::fprintf(stderr, "%s\n", std::string(decoder.status().message()).c_str());
    return 1;
  }
  const double load_s = Since(load_start);
  auto start = std::chrono::steady_clock::now();
  auto logits = (*decoder)->Append(prompt);
  const double prefill_s = Since(start);
  std::vector<int64_t> cached;
  start = std::chrono::steady_clock::now();
  for (int64_t t = 0; t < new_tokens && logits.ok(); ++t) {
    cached.push_back(logits->argmax().item<int64_t>());
    if (t + 1 < new_tokens) logits = (*decoder)->Append({cached.back()});
  }
  const double cached_s = Since(start);
  if (!logits.ok()) {
    std::fprintf(stderr, "%s\n", std::string(logits.status().message()).c_str());
    return 1;
  }
  std::vector<int64_t> ids = prompt, recomputed;
  start = std::chrono::steady_clock::now();
  for (int64_t t = 0; t < new_tokens; ++t) {
    auto hidden = (*streamer)->Run({at::tensor(ids, at::kLong).unsqueeze(0)});
    if (!hidden.ok()) return 1;
    const at::Tensor& h = (*hidden)[0];
    auto full = (*streamer)->model().Logits(h.narrow(1, h.size(1) - 1, 1));
    if (!full.ok()) return 1;
    recomputed.push_back(full->reshape({-1}).argmax().item<int64_t>());
    ids.push_back(recomputed.back());
  }
  const double recompute_s = Since(start);
  std::printf("model %s, prompt %lld tokens, %lld new tokens, threads %lld\n", model.c_str(),
              static_cast<long long>(prompt_tokens), static_cast<long long>(new_tokens),
              static_cast<long long>(threads));
  std::printf("load (whole model + cache): %.3f s, %lld bytes by the budget formula\n", load_s,
              static_cast<long long>(quark::eval::KvCacheDecoderBytes((*streamer)->config(), at::kFloat,
                                                                      options.max_tokens)));
  std::printf("prefill:            %.3f s (%.1f tokens/s)\n", prefill_s, prompt_tokens / prefill_s);
  std::printf("decode, KV cache:   %.3f s (%.2f tokens/s)\n", cached_s, new_tokens / cached_s);
  std::printf("decode, recompute:  %.3f s (%.2f tokens/s)\n", recompute_s, new_tokens / recompute_s);
  std::printf("same tokens: %s\n", cached == recomputed ? "yes" : "NO");
  return cached == recomputed ? 0 : 1;
}
