// The parts of a causal LM around its decoder layers: embeddings, per-length context (RoPE tables, mask),
// layer loading by index, final norm + lm_head. Holds no decoder layer itself: the LayerStreamer loads them
// one at a time, CausalLm (full_model.h) all at once.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/checkpoint/model_config.h"
#include "core/runtime/activation_home.h"
#include "core/runtime/decoder_layer.h"
#include "core/runtime/weight_source.h"

namespace quark::runtime {

class TransformerModel {
 public:
  /// `compute_dtype`: float32 (default on CPU), bfloat16 or float16. Reads only the config here; weights
  /// are read when used. Errors: InvalidArgument for a non-float compute dtype.
  /// `device`: where the weights' tensors live (a DeviceWeightSource places them); the model puts its own tensors
  /// (token ids, RoPE tables, masks) there too.
  static absl::StatusOr<std::unique_ptr<TransformerModel>> Create(checkpoint::ModelConfig config,
                                                                  std::shared_ptr<const WeightSource> weights,
                                                                  at::ScalarType compute_dtype = at::kFloat,
                                                                  at::Device device = at::kCPU);

  const checkpoint::ModelConfig& config() const { return config_; }
  const WeightSource& weights() const { return *weights_; }
  /// The same source, shared (another model over it, e.g. with some tensors replaced).
  std::shared_ptr<const WeightSource> shared_weights() const { return weights_; }
  at::ScalarType compute_dtype() const { return dtype_; }
  const at::Device& device() const { return device_; }
  /// Where the current layer's activations are kept (the streamer sets it before each layer computes): passes place
  /// samples on the device with it and hold what they keep with it.
  const ActivationHome& activations() const { return activations_; }
  void set_activations_on_host(bool on_host) { activations_ = ActivationHome(device_, on_host); }

  /// ids [B, T] int64 -> hidden [B, T, hidden] in the compute dtype (OPT: plus learned positions and
  /// project_in). InvalidArgument naming the position when an id is outside [0, vocab_size) or T exceeds
  /// max_position_embeddings for OPT.
  absl::StatusOr<at::Tensor> Embed(const at::Tensor& ids) const;

  /// RoPE tables and causal mask for sequences of `seq_len` tokens (cached per length).
  const LayerContext& Context(int64_t seq_len);

  /// Loads decoder layer `index` (0-based) from the weights.
  absl::StatusOr<std::shared_ptr<DecoderLayer>> LoadLayer(int64_t index) const;

  /// hidden [B, T, hidden] after the last layer -> logits [B, T, vocab] float32 (final norm, OPT's
  /// project_out, lm_head or the tied embedding).
  absl::StatusOr<at::Tensor> Logits(const at::Tensor& hidden);

  /// Next-token negative log-likelihoods: position t predicts ids[:, t + 1]. hidden [B, T, hidden], ids [B, T]
  /// -> [B, T - 1] float64 in host memory. Computes the vocabulary in chunks, so [T, vocab] logits are never held at once.
  absl::StatusOr<at::Tensor> NextTokenNll(const at::Tensor& hidden, const at::Tensor& ids);

 private:
  TransformerModel(checkpoint::ModelConfig config, std::shared_ptr<const WeightSource> weights, at::ScalarType dtype,
                   at::Device device)
      : config_(std::move(config)), weights_(std::move(weights)), dtype_(dtype), device_(device),
        activations_(device, /*on_host=*/false) {}
  absl::Status LoadHead();
  absl::StatusOr<at::Tensor> FinalHidden(const at::Tensor& hidden);
  at::Tensor SoftCap(const at::Tensor& logits) const;  // float32 logits, capped when final_logit_softcapping > 0

  checkpoint::ModelConfig config_;
  std::shared_ptr<const WeightSource> weights_;
  at::ScalarType dtype_;
  at::Device device_;
  ActivationHome activations_;
  std::map<int64_t, LayerContext> contexts_;
  // Loaded on first use, in the stored dtype where possible (zero-copy views).
  at::Tensor lm_head_;            // [vocab, embed_dim]
  at::Tensor final_norm_weight_;  // [hidden]
  at::Tensor final_norm_bias_;    // OPT
  at::Tensor project_out_;        // OPT with word_embed_proj_dim != hidden
  bool head_loaded_ = false;
};

}  // namespace quark::runtime
