#include "core/eval/kv_cache_decoder.h"

#include <cmath>
#include <limits>

#include "core/base/strings.h"
#include "core/runtime/matmul_precision.h"

namespace quark::eval {
namespace {

// [n, total] additive float32 mask of n new queries at positions total-n..total-1: query j sees key t when
// t <= total - n + j and, with a window W > 0, total - n + j - W < t (attention.h's CausalMask, its last n rows).
at::Tensor NewTokensMask(int64_t n, int64_t total, int64_t window) {
  const float inf = std::numeric_limits<float>::infinity();
  const at::Tensor query = at::arange(total - n, total, at::kLong).unsqueeze(1);  // [n, 1]
  const at::Tensor key = at::arange(total, at::kLong).unsqueeze(0);               // [1, total]
  at::Tensor hidden = key > query;
  if (window > 0) hidden = hidden.logical_or(key <= query - window);
  return at::zeros({n, total}, at::kFloat).masked_fill_(hidden, -inf);
}

}  // namespace

int64_t KvCacheDecoderBytes(const checkpoint::ModelConfig& config, at::ScalarType dtype, int64_t max_tokens) {
  const int64_t hidden = config.hidden_size, d = config.head_dim;
  const int64_t q = config.num_attention_heads * d, kv = config.num_key_value_heads * d;
  const int64_t per_layer = hidden * q * 2 + hidden * kv * 2 + 3 * hidden * config.intermediate_size + 2 * hidden +
                            (config.qk_norm ? 2 * d : 0);
  const int64_t cache = 2 * kv * max_tokens;
  return (per_layer + cache) * config.num_hidden_layers * static_cast<int64_t>(c10::elementSize(dtype));
}

absl::StatusOr<std::unique_ptr<KvCacheDecoder>> KvCacheDecoder::Load(runtime::LayerStreamer& streamer,
                                                                     const runtime::LayerHooks& hooks,
                                                                     const KvCacheOptions& options) {
  const checkpoint::ModelConfig& config = streamer.config();
  if (config.family != checkpoint::ArchFamily::kLlama) {
    return absl::UnimplementedError(StrCat("greedy generation with a KV cache runs dense Llama-family models (llama, "
                                           "mistral, qwen2, qwen3); model_type \"", config.model_type, "\" is not one"));
  }
  if (options.max_tokens < 1) return absl::InvalidArgumentError(StrCat("max_tokens ", options.max_tokens, " < 1"));
  runtime::TransformerModel& model = streamer.model();
  const int64_t need = KvCacheDecoderBytes(config, model.compute_dtype(), options.max_tokens);
  if (options.memory_budget > 0 && need > options.memory_budget) {
    return absl::ResourceExhaustedError(
        StrCat("greedy generation holds the whole model and a KV cache of ", options.max_tokens, " tokens: ", need,
               " bytes, over the memory budget of ", options.memory_budget,
               " bytes (generation is not layer-streamed: raise the budget or evaluate a smaller model)"));
  }
  std::unique_ptr<KvCacheDecoder> decoder(new KvCacheDecoder(&model, options));
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    auto loaded = model.LoadLayer(i);
    if (!loaded.ok()) return loaded.status();
    if (hooks.before) {
      if (auto status = hooks.before(i, **loaded, {}); !status.ok()) return status;
    }
    auto layer = std::dynamic_pointer_cast<runtime::LlamaDecoderLayer>(*loaded);
    if (!layer) return absl::InternalError(StrCat("layer ", i, " of a Llama-family model is not a Llama layer"));
    const at::TensorOptions cache = at::TensorOptions().dtype(model.compute_dtype()).device(model.device());
    decoder->keys_.push_back(
        at::empty({1, config.num_key_value_heads, options.max_tokens, config.head_dim}, cache));
    decoder->values_.push_back(at::empty_like(decoder->keys_.back()));
    decoder->layers_.push_back(std::move(layer));
  }
  runtime::RopeTables(config, options.max_tokens, model.compute_dtype(), &decoder->cos_, &decoder->sin_);
  decoder->cos_ = decoder->cos_.to(model.device());
  decoder->sin_ = decoder->sin_.to(model.device());
  return decoder;
}

void KvCacheDecoder::Reset() { length_ = 0; }

at::Tensor KvCacheDecoder::Attend(size_t i, const at::Tensor& x) {
  const runtime::LlamaAttention& attn = *layers_[i]->self_attn;
  const int64_t n = x.size(1), total = length_ + n;
  const int64_t heads = attn.heads, kv_heads = attn.kv_heads, dim = attn.head_dim, rep = heads / kv_heads;
  // As LlamaAttention::forward, for the new tokens only.
  at::Tensor q = attn.q_proj->forward(x).view({1, n, heads, dim});
  at::Tensor k = attn.k_proj->forward(x).view({1, n, kv_heads, dim});
  if (attn.q_norm) q = attn.q_norm->forward(q);
  if (attn.k_norm) k = attn.k_norm->forward(k);
  const at::Tensor cos = cos_.narrow(0, length_, n), sin = sin_.narrow(0, length_, n);
  q = runtime::ApplyRope(q.transpose(1, 2), cos, sin).contiguous();
  k = runtime::ApplyRope(k.transpose(1, 2), cos, sin);
  const at::Tensor v = attn.v_proj->forward(x).view({1, n, kv_heads, dim}).transpose(1, 2);
  keys_[i].narrow(2, length_, n).copy_(k);
  values_[i].narrow(2, length_, n).copy_(v);
  // As runtime::CausalAttention: the query heads sharing a KV head side by side, scores and softmax in float32.
  const at::ScalarType compute = runtime::MatmulInFloat32(q) ? at::kFloat : q.scalar_type();
  const at::Tensor keys = keys_[i].narrow(2, 0, total).to(compute);
  const at::Tensor values = values_[i].narrow(2, 0, total).to(compute);
  const at::Tensor grouped_q = q.to(compute).reshape({1, kv_heads, rep * n, dim});
  at::Tensor scores = at::matmul(grouped_q, keys.transpose(-1, -2)).to(at::kFloat).mul_(1.0 / std::sqrt(dim));
  scores = scores.view({1, kv_heads, rep, n, total}).add_(NewTokensMask(n, total, attn.window).to(scores.device()));
  const at::Tensor probs = at::softmax(scores, -1).to(compute).view({1, kv_heads, rep * n, total});
  const at::Tensor out = at::matmul(probs, values).view({1, heads, n, dim}).transpose(1, 2).reshape({1, n, heads * dim});
  return attn.o_proj->forward(out.to(x.scalar_type()));
}

absl::StatusOr<at::Tensor> KvCacheDecoder::Append(const std::vector<int64_t>& tokens) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) return absl::InvalidArgumentError("no tokens to append");
  if (length_ + n > options_.max_tokens) {
    return absl::InvalidArgumentError(
        StrCat(length_, " cached + ", n, " new tokens pass the cache's ", options_.max_tokens, " positions"));
  }
  try {
    auto embedded = model_->Embed(at::tensor(tokens, at::kLong).unsqueeze(0));
    if (!embedded.ok()) return embedded.status();
    at::Tensor h = *embedded;
    for (size_t i = 0; i < layers_.size(); ++i) {
      runtime::LlamaDecoderLayer& layer = *layers_[i];
      h = h + Attend(i, layer.input_layernorm->forward(h));
      h = h + layer.mlp->forward(layer.post_attention_layernorm->forward(h));
    }
    length_ += n;
    auto logits = model_->Logits(h.narrow(1, n - 1, 1));
    if (!logits.ok()) return logits.status();
    return logits->reshape({-1}).to(at::kFloat).cpu();
  } catch (const std::exception& error) {
    return runtime::TorchErrorToStatus(error, "cached forward");
  }
}

}  // namespace quark::eval
