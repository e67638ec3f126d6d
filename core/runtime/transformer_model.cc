#include "core/runtime/transformer_model.h"

#include <cmath>

#include "core/base/strings.h"
#include "core/checkpoint/model_layout.h"
#include "core/runtime/attention.h"
#include "core/runtime/deepseek_attention.h"
#include "core/runtime/deepseek_layer.h"
#include "core/runtime/llama4_layer.h"
#include "core/runtime/gemma_layer.h"
#include "core/runtime/gpt_oss_layer.h"
#include "core/runtime/gpt_oss_model.h"
#include "core/runtime/layerwise_logits.h"  // AsDecoderLayer
#include "core/runtime/llama_layer.h"
#include "core/runtime/matmul_precision.h"
#include "core/runtime/module_loader.h"
#include "core/runtime/moe_layer.h"
#include "core/runtime/opt_layer.h"
#include "core/runtime/phi3_layer.h"

namespace quark::runtime {
namespace {

using checkpoint::ArchFamily;

// Rows of the vocabulary per lm_head chunk: [T, chunk] float32 logits at a time.
constexpr int64_t kVocabChunk = 8192;

bool IsOpt(const checkpoint::ModelConfig& config) { return config.family == ArchFamily::kOpt; }

}  // namespace

absl::StatusOr<std::unique_ptr<TransformerModel>> TransformerModel::Create(checkpoint::ModelConfig config,
                                                                           std::shared_ptr<const WeightSource> weights,
                                                                           at::ScalarType compute_dtype,
                                                                           at::Device device) {
  if (compute_dtype != at::kFloat && compute_dtype != at::kBFloat16 && compute_dtype != at::kHalf &&
      compute_dtype != at::kDouble) {
    return absl::InvalidArgumentError(StrCat("compute dtype ", c10::toString(compute_dtype), " is not a float type"));
  }
  return std::unique_ptr<TransformerModel>(new TransformerModel(std::move(config), std::move(weights), compute_dtype, device));
}

absl::StatusOr<at::Tensor> TransformerModel::Embed(const at::Tensor& ids) const {
  if (ids.dim() != 2 || ids.scalar_type() != at::kLong) {
    return absl::InvalidArgumentError(StrCat("token ids must be [batch, tokens] int64, got ", ids.dim(), " dims of ",
                                             c10::toString(ids.scalar_type())));
  }
  if (ids.numel() > 0) {
    const int64_t lo = ids.min().item<int64_t>(), hi = ids.max().item<int64_t>();
    if (lo < 0 || hi >= config_.vocab_size) {
      const int64_t bad = lo < 0 ? lo : hi;
      const int64_t at = (ids.view(-1) == bad).nonzero()[0].item<int64_t>();
      return absl::InvalidArgumentError(StrCat("token id ", bad, " at position ", at, " is outside the vocabulary [0, ",
                                               config_.vocab_size, ")"));
    }
  }
  // The rows are looked up on the host (the table can be a GB the device need not hold), then placed.
  auto table = weights_->GetStoredOnHost(checkpoint::EmbedTokensName(config_) + ".weight");
  if (!table.ok()) return table.status();
  at::Tensor hidden = at::embedding(*table, ids.to(table->device())).to(device_).to(dtype_);
  // Gemma scales the embedding by sqrt(hidden_size), rounded to the hidden dtype first (HF's Gemma2Model normalizer).
  if (config_.family == ArchFamily::kGemma) {
    return hidden * at::scalar_tensor(std::sqrt(static_cast<double>(config_.hidden_size)), dtype_);
  }
  if (!IsOpt(config_)) return hidden;
  const int64_t seq = ids.size(1);
  if (seq > config_.max_position_embeddings) {
    return absl::InvalidArgumentError(StrCat("sequence of ", seq, " tokens exceeds max_position_embeddings = ",
                                             config_.max_position_embeddings));
  }
  if (config_.word_embed_proj_dim != config_.hidden_size) {
    auto project_in = weights_->Get("model.decoder.project_in.weight", dtype_);
    if (!project_in.ok()) return project_in.status();
    hidden = ComputeLinear(hidden, *project_in, at::Tensor());
  }
  auto positions = weights_->GetStoredOnHost("model.decoder.embed_positions.weight");
  if (!positions.ok()) return positions.status();
  // OPT's learned positions start at row 2 (HF's OPTLearnedPositionalEmbedding offset).
  return hidden + positions->narrow(0, checkpoint::kOptPositionOffset, seq).to(device_).to(dtype_).unsqueeze(0);
}

const LayerContext& TransformerModel::Context(int64_t seq_len) {
  auto it = contexts_.find(seq_len);
  if (it != contexts_.end()) return it->second;
  LayerContext context;
  context.seq_len = seq_len;
  context.mask = CausalMask(seq_len);
  context.sliding_window = config_.sliding_window;
  if (config_.sliding_window > 0) {
    // A window at least as long as the sequence hides nothing: share the plain mask rather than build a copy.
    context.sliding_mask = config_.sliding_window < seq_len ? CausalMask(seq_len, config_.sliding_window) : context.mask;
  }
  if (config_.family == ArchFamily::kDeepseek) {
    DeepseekRopeTables(*config_.deepseek, seq_len, dtype_, &context.cos, &context.sin);  // YaRN over the rope dims
  } else if (config_.family == ArchFamily::kGptOss) {
    const LayerContext own = GptOssLayerContext(*config_.gpt_oss, seq_len, dtype_);  // YaRN over whole heads
    context.cos = own.cos;
    context.sin = own.sin;
  } else if (!IsOpt(config_)) {
    RopeTables(config_, seq_len, dtype_, &context.cos, &context.sin);
  }
  if (config_.rope_local_base_freq > 0) {
    // Gemma 3's sliding layers: their own base, without the global rope_scaling (HF's rotary_emb_local).
    checkpoint::ModelConfig local = config_;
    local.rope_theta = config_.rope_local_base_freq;
    local.rope_scaling.reset();
    RopeTables(local, seq_len, dtype_, &context.local_cos, &context.local_sin);
  }
  // Built on the host (small, once per length), kept where the layers compute.
  for (at::Tensor* t : {&context.mask, &context.sliding_mask, &context.cos, &context.sin, &context.local_cos,
                        &context.local_sin}) {
    if (t->defined()) *t = t->to(device_);
  }
  return contexts_.emplace(seq_len, std::move(context)).first->second;
}

absl::StatusOr<std::shared_ptr<DecoderLayer>> TransformerModel::LoadLayer(int64_t index) const {
  if (index < 0 || index >= config_.num_hidden_layers) {
    return absl::OutOfRangeError(StrCat("layer ", index, " outside [0, ", config_.num_hidden_layers, ")"));
  }
  switch (config_.family) {
    case ArchFamily::kOpt: return AsDecoderLayer(OptDecoderLayer::Load(config_, index, *weights_, dtype_));
    case ArchFamily::kPhi3: return AsDecoderLayer(Phi3DecoderLayer::Load(config_, index, *weights_, dtype_));
    case ArchFamily::kGemma: return AsDecoderLayer(GemmaDecoderLayer::Load(config_, index, *weights_, dtype_));
    case ArchFamily::kMoe: return AsDecoderLayer(MoeDecoderLayer::Load(config_, index, *weights_, dtype_));
    case ArchFamily::kDeepseek:
      return AsDecoderLayer(DeepseekDecoderLayer::Load(*config_.deepseek, index, *weights_, dtype_));
    case ArchFamily::kLlama4: return AsDecoderLayer(Llama4DecoderLayer::Load(*config_.llama4, index, *weights_, dtype_));
    case ArchFamily::kGptOss: return AsDecoderLayer(GptOssDecoderLayer::Load(*config_.gpt_oss, index, *weights_, dtype_));
    case ArchFamily::kLlama: break;
  }
  return AsDecoderLayer(LlamaDecoderLayer::Load(config_, index, *weights_, dtype_));
}

absl::Status TransformerModel::LoadHead() {
  if (head_loaded_) return absl::OkStatus();
  const std::string head_name = config_.tie_word_embeddings ? checkpoint::EmbedTokensName(config_) + ".weight" : "lm_head.weight";
  auto head = weights_->GetStored(head_name);
  if (!head.ok()) return head.status();
  lm_head_ = *head;
  const bool has_final_norm = !IsOpt(config_) || config_.do_layer_norm_before;
  if (has_final_norm && (!IsOpt(config_) || config_.layer_norm_elementwise_affine)) {
    const std::string norm = checkpoint::FinalNormName(config_);
    auto weight = LoadChecked(*weights_, norm + ".weight", {config_.hidden_size}, dtype_);
    if (!weight.ok()) return weight.status();
    final_norm_weight_ = *weight;
    if (IsOpt(config_)) {
      auto bias = LoadChecked(*weights_, norm + ".bias", {config_.hidden_size}, dtype_);
      if (!bias.ok()) return bias.status();
      final_norm_bias_ = *bias;
    }
  }
  if (IsOpt(config_) && config_.word_embed_proj_dim != config_.hidden_size) {
    auto project_out = weights_->Get("model.decoder.project_out.weight", dtype_);
    if (!project_out.ok()) return project_out.status();
    project_out_ = *project_out;
  }
  head_loaded_ = true;
  return absl::OkStatus();
}

absl::StatusOr<at::Tensor> TransformerModel::FinalHidden(const at::Tensor& hidden) {
  if (auto status = LoadHead(); !status.ok()) return status;
  at::Tensor h = activations_.Place(hidden);  // the last layer's outputs, kept on the host when they did not fit
  if (!IsOpt(config_)) {
    h = RmsNorm(final_norm_weight_, config_.rms_norm_eps, config_.family == ArchFamily::kGemma).forward(h);
  } else if (config_.do_layer_norm_before) {
    h = LayerNorm(final_norm_weight_, final_norm_bias_, config_.layer_norm_eps).forward(h);
  }
  if (project_out_.defined()) h = ComputeLinear(h, project_out_, at::Tensor());
  return h;
}

at::Tensor TransformerModel::SoftCap(const at::Tensor& logits) const {
  // Gemma's final_logit_softcapping (HF: logits / cap, tanh, * cap), here on the float32 logits.
  const double cap = config_.final_logit_softcapping;
  return cap > 0 ? (logits / cap).tanh() * cap : logits;
}

absl::StatusOr<at::Tensor> TransformerModel::Logits(const at::Tensor& hidden) {
  auto h = FinalHidden(hidden);
  if (!h.ok()) return h.status();
  std::vector<at::Tensor> chunks;
  for (int64_t start = 0; start < config_.vocab_size; start += kVocabChunk) {
    const int64_t n = std::min(kVocabChunk, config_.vocab_size - start);
    chunks.push_back(SoftCap(ComputeLinear(*h, lm_head_.narrow(0, start, n), at::Tensor()).to(at::kFloat)));
  }
  return at::cat(chunks, -1);
}

absl::StatusOr<at::Tensor> TransformerModel::NextTokenNll(const at::Tensor& hidden, const at::Tensor& ids) {
  auto h = FinalHidden(hidden);
  if (!h.ok()) return h.status();
  const int64_t seq = ids.size(1);
  if (seq < 2) return at::zeros({ids.size(0), 0}, at::kDouble);
  const at::Tensor inputs = h->narrow(1, 0, seq - 1);        // [B, T-1, H]
  const at::Tensor targets = ids.narrow(1, 1, seq - 1).to(h->device());  // [B, T-1]
  at::Tensor running_max, running_sum, target_logit = at::zeros(targets.sizes(), h->options().dtype(at::kFloat));
  for (int64_t start = 0; start < config_.vocab_size; start += kVocabChunk) {
    const int64_t n = std::min(kVocabChunk, config_.vocab_size - start);
    const at::Tensor logits = SoftCap(ComputeLinear(inputs, lm_head_.narrow(0, start, n), at::Tensor()).to(at::kFloat));  // [B, T-1, n]
    const at::Tensor chunk_max = std::get<0>(logits.max(-1));
    if (!running_max.defined()) {
      running_max = chunk_max;
      running_sum = (logits - chunk_max.unsqueeze(-1)).exp().sum(-1);
    } else {
      const at::Tensor new_max = at::maximum(running_max, chunk_max);
      running_sum = running_sum * (running_max - new_max).exp() + (logits - new_max.unsqueeze(-1)).exp().sum(-1);
      running_max = new_max;
    }
    const at::Tensor in_chunk = (targets >= start) & (targets < start + n);
    const at::Tensor local = (targets - start).clamp(0, n - 1);
    target_logit = at::where(in_chunk, logits.gather(-1, local.unsqueeze(-1)).squeeze(-1), target_logit);
  }
  return ((running_max.to(at::kDouble) + running_sum.to(at::kDouble).log()) - target_logit.to(at::kDouble)).to(at::kCPU);
}

}  // namespace quark::runtime
