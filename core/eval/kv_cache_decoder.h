// The whole dense Llama-family model in memory with a KV cache, for greedy generation (generate_until tasks such as
// GSM8K): every decoder layer is loaded once (with the model's hooks' `before` applied, so an HF-quark export's
// quantized linears and activation quantization are what runs), and each new token attends to the keys and values
// cached for the tokens before it instead of recomputing them.
//
// Memory: the decoder holds every layer's weights in the compute dtype and a KV cache of `max_tokens` positions:
//   need = sum over layers of (q, k, v, o, gate, up, down, norms) elements * sizeof(compute dtype)
//        + 2 * layers * kv_heads * head_dim * max_tokens * sizeof(compute dtype)
// When `need` exceeds the budget, Load refuses with RESOURCE_EXHAUSTED naming both figures: generation is not
// layer-streamed (each new token would reread every layer's weights), so a model too large to hold cannot generate.
// Activation quantization that is static or per token gives the same result cached or not; a per-tensor *dynamic*
// scale is taken over the tokens of each call (the new token when decoding), not over the whole sequence.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/runtime/layer_streamer.h"
#include "core/runtime/llama_layer.h"

namespace quark::eval {

struct KvCacheOptions {
  /// Positions the cache holds (prompt + generated tokens).
  int64_t max_tokens = 2048;
  /// Bytes the decoder may hold (weights + cache); 0 = no limit.
  int64_t memory_budget = 0;
};

/// Bytes the decoder needs for `config` in `dtype` by the formula above.
int64_t KvCacheDecoderBytes(const checkpoint::ModelConfig& config, at::ScalarType dtype, int64_t max_tokens);

class KvCacheDecoder {
 public:
  /// Loads every layer of `streamer`'s model (`streamer` must outlive the decoder; only `hooks.before` runs, with
  /// no inputs). Unimplemented for families other than dense Llama (llama, mistral,
  /// qwen2, qwen3); RESOURCE_EXHAUSTED when the budget is too small; loader and hook errors pass through.
  static absl::StatusOr<std::unique_ptr<KvCacheDecoder>> Load(runtime::LayerStreamer& streamer,
                                                              const runtime::LayerHooks& hooks,
                                                              const KvCacheOptions& options);

  /// Forgets the cached tokens.
  void Reset();
  /// Feeds `tokens` after the cached ones and returns the logits of the last one, [vocab] float32.
  /// InvalidArgument when the cache would pass max_tokens or `tokens` is empty.
  absl::StatusOr<at::Tensor> Append(const std::vector<int64_t>& tokens);
  /// Tokens cached so far.
  int64_t length() const { return length_; }

 private:
  KvCacheDecoder(runtime::TransformerModel* model, KvCacheOptions options) : model_(model), options_(options) {}
  // x [1, n, hidden] at positions length_..length_+n-1 through layer i's attention, its cache extended.
  at::Tensor Attend(size_t i, const at::Tensor& x);

  runtime::TransformerModel* model_;  // the streamer's, which outlives the decoder
  KvCacheOptions options_;
  std::vector<std::shared_ptr<runtime::LlamaDecoderLayer>> layers_;
  std::vector<at::Tensor> keys_, values_;  // per layer [1, kv_heads, max_tokens, head_dim]
  at::Tensor cos_, sin_;                   // [max_tokens, head_dim]
  int64_t length_ = 0;
};

}  // namespace quark::eval
