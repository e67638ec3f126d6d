#include "core/runtime/layerwise_logits.h"

#include "core/base/strings.h"
#include "core/runtime/attention.h"
#include "core/runtime/module_loader.h"

namespace quark::runtime {

absl::StatusOr<at::Tensor> LayerwiseLogits(const checkpoint::ModelConfig& base, const WeightSource& weights,
                                           const at::Tensor& ids, at::ScalarType dtype, const LayerContext& context,
                                           const LayerLoader& load, const LayerHook& prepare) {
  if (ids.dim() != 2 || ids.scalar_type() != at::kLong) return absl::InvalidArgumentError("token ids must be [batch, tokens] int64");
  if (ids.numel() > 0 && (ids.min().item<int64_t>() < 0 || ids.max().item<int64_t>() >= base.vocab_size)) {
    return absl::InvalidArgumentError(StrCat("a token id is outside the vocabulary [0, ", base.vocab_size, ")"));
  }
  auto table = LoadChecked(weights, "model.embed_tokens.weight", {base.vocab_size, base.hidden_size}, dtype);
  if (!table.ok()) return table.status();
  at::Tensor hidden = at::embedding(*table, ids);
  for (int64_t i = 0; i < base.num_hidden_layers; ++i) {
    auto layer = load(i);
    if (!layer.ok()) return layer.status();
    if (prepare) {
      if (auto status = prepare(**layer); !status.ok()) return status;
    }
    hidden = (*layer)->forward(hidden, context);
  }
  auto norm = LoadChecked(weights, "model.norm.weight", {base.hidden_size}, dtype);
  if (!norm.ok()) return norm.status();
  const std::string head_name = base.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
  auto head = LoadChecked(weights, head_name, {base.vocab_size, base.hidden_size}, dtype);
  if (!head.ok()) return head.status();
  return at::linear(RmsNorm(*norm, base.rms_norm_eps).forward(hidden), *head).to(at::promote_types(dtype, at::kFloat));
}

}  // namespace quark::runtime
