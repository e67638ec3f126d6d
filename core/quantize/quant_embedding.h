// Quantized replacements for torch::nn::Embedding and torch::nn::EmbeddingBag (Quark's QuantEmbedding /
// QuantEmbeddingBag): the weight [num_embeddings, embedding_dim] is fake-quantized once frozen; the input is
// indices, so input_tensors / output_tensors specs are ignored as Quark ignores them (ModuleQuantizers lists them in
// ignored_fields()). Same forward signatures as the float modules, so a Sequential's AnyModule or a user's field
// can hold either.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/any_value.h>
#include <torch/nn/modules/embedding.h>

#include <iosfwd>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"
#include "core/quantize/module_quantizers.h"

namespace quark::quantize {

class QuantEmbedding : public torch::nn::Module {
 public:
  /// A quantized copy of `float_module` (its options and weight; the float module is left as it was).
  /// INVALID_ARGUMENT naming `<name>.<field>` for a spec that does not fit the weight, or for max_norm, which
  /// renormalizes the weight in place on every call and so would rewrite the quantized weight.
  static absl::StatusOr<std::shared_ptr<QuantEmbedding>> Create(const std::string& name, const LayerQuantConfig& config,
                                                                const torch::nn::EmbeddingImpl& float_module);

  /// indices (any shape, int64/int32) -> [..., embedding_dim]: rows of the weight (fake-quantized once frozen).
  at::Tensor forward(const at::Tensor& indices);

  ModuleQuantizers& quantizers() { return *q_; }
  const ModuleQuantizers& quantizers() const { return *q_; }
  /// "QuantEmbedding(<name>, num_embeddings, embedding_dim)".
  void pretty_print(std::ostream& stream) const override;

 private:
  QuantEmbedding() = default;
  torch::nn::EmbeddingOptions options_{0, 0};
  std::unique_ptr<ModuleQuantizers> q_;
};

class QuantEmbeddingBag : public torch::nn::Module {
 public:
  /// As QuantEmbedding::Create, for an EmbeddingBag (mode sum / mean / max, include_last_offset, padding_idx kept).
  static absl::StatusOr<std::shared_ptr<QuantEmbeddingBag>> Create(const std::string& name,
                                                                   const LayerQuantConfig& config,
                                                                   const torch::nn::EmbeddingBagImpl& float_module);

  /// As torch::nn::EmbeddingBag::forward: indices 1-D with `offsets` [bags] (or 2-D [bags, n] without offsets),
  /// optional per_sample_weights (sum mode only) of the indices' shape -> [bags, embedding_dim].
  /// Throws c10::Error for inputs torch refuses, as the float module does.
  at::Tensor forward(const at::Tensor& input, const at::Tensor& offsets = {},
                     const at::Tensor& per_sample_weights = {});

  ModuleQuantizers& quantizers() { return *q_; }
  const ModuleQuantizers& quantizers() const { return *q_; }
  /// "QuantEmbeddingBag(<name>, num_embeddings, embedding_dim, mode=kMean)".
  void pretty_print(std::ostream& stream) const override;

 protected:
  // AnyModule (Sequential) may call forward(input) alone, as it may the float EmbeddingBag.
  FORWARD_HAS_DEFAULT_ARGS({1, torch::nn::AnyValue(at::Tensor())}, {2, torch::nn::AnyValue(at::Tensor())})

 private:
  QuantEmbeddingBag() = default;
  torch::nn::EmbeddingBagOptions options_{0, 0};
  std::unique_ptr<ModuleQuantizers> q_;
};

}  // namespace quark::quantize
