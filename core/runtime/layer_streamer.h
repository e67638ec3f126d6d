// Runs a model one decoder layer at a time, so that only one layer's weights and the activations of the
// samples are ever in memory, whatever the model's size: the spine of calibration, quantization, export and
// evaluation.
//
//   embeddings(samples) -> for each layer i: load i from the weights -> hooks.before(i, layer, inputs)
//   -> outputs = layer(inputs) -> hooks.after(i, layer, inputs, outputs) -> release layer i -> next.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/checkpoint/model_config.h"
#include "core/runtime/decoder_layer.h"
#include "core/runtime/transformer_model.h"
#include "core/runtime/weight_source.h"

namespace quark::runtime {

struct StreamerOptions {
  /// Activations and weights are computed in this dtype (float32 on CPU by default).
  at::ScalarType compute_dtype = at::kFloat;
};

/// The plug-in points of the quantizer and its algorithms. Inputs and outputs are one tensor per sample,
/// [1, T, hidden] in the compute dtype. Either hook may be empty.
struct LayerHooks {
  /// Before the layer's outputs are computed: may observe the inputs, edit weights, or ReplaceLinear().
  std::function<absl::Status(int64_t layer_index, DecoderLayer& layer, const std::vector<at::Tensor>& inputs)> before;
  /// After: the outputs feed the next layer (an exporter writes the finished layer here).
  std::function<absl::Status(int64_t layer_index, DecoderLayer& layer, const std::vector<at::Tensor>& inputs,
                             const std::vector<at::Tensor>& outputs)>
      after;
};

class LayerStreamer {
 public:
  /// Opens an HF folder: config.json + safetensors (mmapped, validated).
  static absl::StatusOr<std::unique_ptr<LayerStreamer>> Open(const std::string& model_dir, StreamerOptions options = {});
  /// Streams a model from any WeightSource (e.g. one that dequantizes packed weights).
  static absl::StatusOr<std::unique_ptr<LayerStreamer>> Create(checkpoint::ModelConfig config,
                                                               std::shared_ptr<const WeightSource> weights,
                                                               StreamerOptions options = {});

  const checkpoint::ModelConfig& config() const { return model_->config(); }
  TransformerModel& model() { return *model_; }

  /// Runs every sample (token ids, [T] or [1, T] int64, lengths may differ) through embeddings and all
  /// decoder layers. Returns each sample's hidden state after the last layer, [1, T, hidden], before the final
  /// norm (feed it to model().Logits / NextTokenNll). A hook's error stops the run and is returned as is;
  /// LibTorch errors come back as Internal naming the layer.
  absl::StatusOr<std::vector<at::Tensor>> Run(const std::vector<at::Tensor>& samples, const LayerHooks& hooks = {});

 private:
  explicit LayerStreamer(std::unique_ptr<TransformerModel> model) : model_(std::move(model)) {}
  absl::Status RunLayer(int64_t index, std::vector<at::Tensor>& hidden, const LayerHooks& hooks);
  std::unique_ptr<TransformerModel> model_;
};

/// Wraps a call that may throw c10::Error into a Status naming `what`.
absl::Status TorchErrorToStatus(const std::exception& error, const std::string& what);

}  // namespace quark::runtime
