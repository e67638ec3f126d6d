// The whole model in memory: every decoder layer loaded at once. For small models and for tests that check
// the layer-streamed forward against the plain one.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/runtime/decoder_layer.h"
#include "core/runtime/transformer_model.h"

namespace quark::runtime {

class CausalLm {
 public:
  /// Loads every layer of `model_dir` in `compute_dtype`.
  static absl::StatusOr<std::unique_ptr<CausalLm>> Open(const std::string& model_dir, at::ScalarType compute_dtype = at::kFloat);
  /// Loads every layer through `model`.
  static absl::StatusOr<std::unique_ptr<CausalLm>> Create(std::unique_ptr<TransformerModel> model);

  /// ids [B, T] int64 -> logits [B, T, vocab] float32.
  absl::StatusOr<at::Tensor> Forward(const at::Tensor& ids);
  /// ids [B, T] -> hidden after the last layer [B, T, hidden] (before the final norm).
  absl::StatusOr<at::Tensor> Hidden(const at::Tensor& ids);

  TransformerModel& model() { return *model_; }
  const std::vector<std::shared_ptr<DecoderLayer>>& layers() const { return layers_; }

 private:
  explicit CausalLm(std::unique_ptr<TransformerModel> model) : model_(std::move(model)) {}
  std::unique_ptr<TransformerModel> model_;
  std::vector<std::shared_ptr<DecoderLayer>> layers_;
};

}  // namespace quark::runtime
