#include "core/quantize/quant_embedding.h"

#include <ostream>

#include <torch/nn/functional/embedding.h>

#include "core/base/strings.h"

namespace quark::quantize {
namespace {

namespace F = torch::nn::functional;

// Both embeddings: weight-only quantization of the detached float weight (no bias, no activations).
absl::StatusOr<std::unique_ptr<ModuleQuantizers>> EmbeddingQuantizers(const std::string& name,
                                                                      const LayerQuantConfig& config,
                                                                      const at::Tensor& weight,
                                                                      const c10::optional<double>& max_norm) {
  if (max_norm) {
    return absl::InvalidArgumentError(StrCat(name, ".max_norm: ", *max_norm, " renormalizes the weight in place on every "
                                             "call, which would rewrite the quantized weight; quantize without max_norm"));
  }
  ModuleQuantizersOptions options;
  options.name = name;
  options.config = config;
  options.weight = weight.detach();
  options.quantize_activations = false;
  return ModuleQuantizers::Create(std::move(options));
}

}  // namespace

absl::StatusOr<std::shared_ptr<QuantEmbedding>> QuantEmbedding::Create(const std::string& name,
                                                                       const LayerQuantConfig& config,
                                                                       const torch::nn::EmbeddingImpl& float_module) {
  auto q = EmbeddingQuantizers(name, config, float_module.weight, float_module.options.max_norm());
  if (!q.ok()) return q.status();
  std::shared_ptr<QuantEmbedding> module(new QuantEmbedding());
  module->options_ = float_module.options;
  module->q_ = *std::move(q);
  return module;
}

at::Tensor QuantEmbedding::forward(const at::Tensor& indices) {
  const at::Tensor weight = q_->weight();
  return F::embedding(indices, weight,
                      F::EmbeddingFuncOptions()
                          .padding_idx(options_.padding_idx())
                          .scale_grad_by_freq(options_.scale_grad_by_freq())
                          .sparse(options_.sparse()));
}

void QuantEmbedding::pretty_print(std::ostream& stream) const {
  stream << "QuantEmbedding(" << q_->name() << ", " << options_.num_embeddings() << ", " << options_.embedding_dim()
         << ")";
}

absl::StatusOr<std::shared_ptr<QuantEmbeddingBag>> QuantEmbeddingBag::Create(
    const std::string& name, const LayerQuantConfig& config, const torch::nn::EmbeddingBagImpl& float_module) {
  auto q = EmbeddingQuantizers(name, config, float_module.weight, float_module.options.max_norm());
  if (!q.ok()) return q.status();
  std::shared_ptr<QuantEmbeddingBag> module(new QuantEmbeddingBag());
  module->options_ = float_module.options;
  module->q_ = *std::move(q);
  return module;
}

at::Tensor QuantEmbeddingBag::forward(const at::Tensor& input, const at::Tensor& offsets,
                                      const at::Tensor& per_sample_weights) {
  // torch's functional form checks the inputs and handles 2-D input exactly as the float module does.
  return F::embedding_bag(input, q_->weight(),
                          F::EmbeddingBagFuncOptions()
                              .offsets(offsets)
                              .mode(options_.mode())
                              .per_sample_weights(per_sample_weights)
                              .include_last_offset(options_.include_last_offset())
                              .padding_idx(options_.padding_idx())
                              .scale_grad_by_freq(options_.scale_grad_by_freq())
                              .sparse(options_.sparse()));
}

void QuantEmbeddingBag::pretty_print(std::ostream& stream) const {
  stream << "QuantEmbeddingBag(" << q_->name() << ", " << options_.num_embeddings() << ", "
         << options_.embedding_dim() << ", mode=" << torch::enumtype::get_enum_name(options_.mode()) << ")";
}

}  // namespace quark::quantize
