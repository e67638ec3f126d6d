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
#include "core/runtime/compute_device.h"
#include "core/runtime/device_weight_source.h"
#include "core/runtime/decoder_layer.h"
#include "core/runtime/transformer_model.h"
#include "core/runtime/weight_source.h"

namespace quark::runtime {

struct StreamerOptions {
  /// Activations and weights are computed in this dtype (float32 on CPU by default).
  at::ScalarType compute_dtype = at::kFloat;
  /// Where layers, their activations and the head live while they compute. On a device that overlaps copies (a GPU)
  /// the next layer's weights are staged in pinned memory and copied on a side stream while this one computes.
  ComputeDevice device;
  /// Bytes of device memory the run may hold (0 = no limit). Before a layer computes, the streamer checks
  ///   need = weights(layer) * buffers + activations + workspace + passes + token passes
  ///     weights(layer): the bytes of the layer's tensors as placed (counted by the DeviceWeightSource),
  ///     buffers:        2 while the next layer is staged beside this one (double buffering), else 1,
  ///     activations:    the samples' hidden states in and out, 2 * sum(T) * hidden * sizeof(compute dtype),
  ///     workspace:      what one sample's forward holds at its widest (checkpoint/forward_workspace.h), the larger of
  ///                       attention: C * (8 + (e if e != 4)) + 6 * T * hidden * e  (C: CausalAttention's score block,
  ///                                  ScoreBlockElements; float32 scores and softmax, probabilities in the compute
  ///                                  dtype; the normed input, q and k each with its contiguous copy, and v)
  ///                       MLP:       4 * T * intermediate * e + 2 * T * hidden * e  (gate, up, their product and its
  ///                                  quantized copy; the normed input and the residual)
  ///                     plus the run's mask and RoPE tables (T^2 * 4 + 2 * T * head_dim * e), with T the longest
  ///                     sample and e = sizeof(compute dtype); with training_forward the larger of that and what
  ///                     autograd keeps of one sample's forward (checkpoint::TrainingForwardBytes),
  ///     passes:         what pass_memory says the caller's passes add for this layer (0 without it),
  ///     token passes:   sum(T) * what pass_bytes_per_token says they keep per token (recorded inputs, a float
  ///                     stream: checkpoint/token_pass_memory.h),
  /// and when need exceeds the budget it gives things up in this order (each step only when the one before does not fit):
  ///   1. double buffering (buffers = 1);
  ///   2. the activations on the device: the samples' hidden states are kept in host memory and cross to the device
  ///      one at a time (ActivationHome), so that activations count one sample in and out, 2 * max(T) * hidden * e,
  ///      and the token passes max(T) tokens (what the passes keep goes to the host too), buffers 2 again, then 1;
  /// and otherwise fails with RESOURCE_EXHAUSTED naming the layer, the bytes and the budget, before the layer
  /// computes. tests/quantize/pass_memory_test.cc holds the formula against the tensor bytes the passes allocate
  /// (runtime::AllocationMeter on the CPU).
  int64_t device_memory_budget = 0;
  /// The bytes the caller's passes hold beside the layer's forward at their widest over `tokens` calibration tokens
  /// (every sample's) (quantize/pass_memory.h: the quantized weight copies, GPTQ's Hessians, AWQ's clip search);
  /// empty = none.
  std::function<int64_t(const DecoderLayer& layer, int64_t tokens)> pass_memory;
  /// The bytes per calibration token the caller's passes keep beside the hidden states (quantize/pass_memory.h:
  /// PassDeviceBytesPerToken); empty = none.
  std::function<int64_t(const DecoderLayer& layer)> pass_bytes_per_token;
  /// A pass trains through the layer (AutoRound): its forwards keep what their backward reads.
  bool training_forward = false;
};

/// The device memory a layer needs by StreamerOptions::device_memory_budget's formula.
struct LayerDeviceMemory {
  int64_t weights = 0;
  int64_t activations = 0;          // every sample's hidden states in and out
  int64_t one_sample_activations = 0;  // the longest sample's in and out: activations kept on the host
  int64_t workspace = 0;
  int64_t passes = 0;
  int64_t bytes_per_token = 0;          // the passes' per-token copies
  int64_t tokens = 0;                   // every sample's
  int64_t longest_sample = 0;           // tokens of the longest sample
  /// The passes' bytes: their fixed term and their per-token copies of every sample (or of one, on the host).
  int64_t Passes(bool activations_on_host = false) const {
    return passes + bytes_per_token * (activations_on_host ? longest_sample : tokens);
  }
  int64_t Need(int buffers, bool activations_on_host = false) const {
    return weights * buffers + (activations_on_host ? one_sample_activations : activations) + workspace +
           Passes(activations_on_host);
  }
};
LayerDeviceMemory LayerDeviceMemoryOf(const checkpoint::ModelConfig& config, int64_t layer_weight_bytes,
                                      const std::vector<at::Tensor>& hidden, bool training_forward = false);

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
  const ComputeDevice& device() const { return options_.device; }
  /// Whether the last run staged each next layer beside the current one (a GPU with room for both).
  bool double_buffered() const { return double_buffered_; }
  /// What this streamer's runs so far needed of the device by the budget's formula, as placed.
  struct MemoryUse {
    int64_t peak_need = 0;              // the largest need of a layer as it ran (its buffers, its activations' home)
    int64_t peak_need_on_device = 0;    // the largest need with every layer's activations on the device, one buffer
    int64_t least_budget = 0;           // the largest need with the activations on the host, one buffer: the
                                        // smallest budget the run fits
    int64_t layers_activations_on_host = 0;  // layers (of every run) whose activations were kept in host memory
  };
  const MemoryUse& memory_use() const { return memory_use_; }
  TransformerModel& model() { return *model_; }
  /// The weights as the streamer reads them, in host memory (model().shared_weights() places them on the device):
  /// what exports and other host readers take.
  std::shared_ptr<const WeightSource> host_weights() const { return placed_->host(); }

  /// Runs every sample (token ids, [T] or [1, T] int64, lengths may differ) through embeddings and all
  /// decoder layers. Returns each sample's hidden state after the last layer, [1, T, hidden], before the final
  /// norm (feed it to model().Logits / NextTokenNll). A hook's error stops the run and is returned as is;
  /// LibTorch errors come back as Internal naming the layer.
  absl::StatusOr<std::vector<at::Tensor>> Run(const std::vector<at::Tensor>& samples, const LayerHooks& hooks = {});

 private:
  LayerStreamer(std::unique_ptr<TransformerModel> model, std::shared_ptr<const DeviceWeightSource> placed,
                StreamerOptions options)
      : model_(std::move(model)), placed_(std::move(placed)), options_(std::move(options)) {}
  absl::Status RunLayer(int64_t index, std::vector<at::Tensor>& hidden, const LayerHooks& hooks);
  // Layer `index` on the device, with the bytes its weights took there.
  absl::StatusOr<std::pair<std::shared_ptr<DecoderLayer>, int64_t>> Load(int64_t index) const;
  // Chooses where the layer's activations are kept and whether the next layer is staged beside it, within the budget;
  // moves `hidden` to that home.
  absl::Status CheckBudget(int64_t index, const DecoderLayer& layer, int64_t weight_bytes,
                           std::vector<at::Tensor>& hidden);

  std::unique_ptr<TransformerModel> model_;
  std::shared_ptr<const DeviceWeightSource> placed_;
  StreamerOptions options_;
  bool double_buffered_ = false;
  MemoryUse memory_use_;
  // The next layer, staged on the device while the current one computes (double buffering).
  std::shared_ptr<DecoderLayer> staged_;
  int64_t staged_bytes_ = 0;
};

/// Wraps a call that may throw c10::Error into a Status naming `what`.
absl::Status TorchErrorToStatus(const std::exception& error, const std::string& what);

}  // namespace quark::runtime
