// Rotation (R1 and R2 of QuaRot / SpinQuant, Quark's offline rotation) as a view of the model's weights: every RMSNorm
// weight is folded into the linears that read it (the norm becomes 1), the residual stream is rotated by an orthonormal
// R1 (embeddings W_e R1; q/k/v and gate/up W R1; o_proj and down_proj R1^T W; lm_head W R1 after the final norm is
// folded; tied embeddings untied), and each attention head's value space by R2 (v_proj rows R2^T per head, o_proj
// columns R2 per head). The rotated float model computes the same function; its activations have no outlier channels,
// which is what quantization after it gains.
//
// The weights are computed when asked for (float64 math, as Quark, cast back to the stored dtype), one tensor at a
// time, so memory stays at a layer; the embedding and lm_head are cached once rotated (the runtime reads them often).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/checkpoint/model_config.h"
#include "core/runtime/weight_source.h"

namespace quark::algorithms {

struct RotationOptions {
  /// false: the Hadamard matrix H / sqrt(n); true: Quark's randomized Hadamard diag(s) H^T / sqrt(n), and a seeded
  /// random orthogonal matrix for sizes with no Hadamard construction.
  bool random = false;
  uint64_t seed = 0;
  bool r2 = true;
  /// R4 (#35 item 4): down_proj's weight also becomes W H4 / sqrt(n) (H4 the +-1 HadamardMatrix of the MLP width n,
  /// never randomized), for a forward that multiplies down_proj's input by H4 / sqrt(n) online
  /// (runtime/online_hadamard_linear.h).
  bool r4 = false;
  /// When defined: this R1 ([hidden_size, hidden_size], orthonormal, e.g. a learned one: learned_rotation.h) instead
  /// of RotationFor's; folded the same way, so every export takes it unchanged. Used as float64.
  at::Tensor r1;
  /// When not empty (and r2): one R2 per decoder layer ([head_dim, head_dim] each, e.g. learned ones) instead of
  /// RotationFor's single matrix.
  std::vector<at::Tensor> r2_per_layer;
};

/// The rotation of order n for `options` (float64, orthonormal). INVALID_ARGUMENT naming `field` and n when n has no
/// Hadamard construction and `random` is off.
absl::StatusOr<at::Tensor> RotationFor(int64_t n, const RotationOptions& options, const std::string& field);

class RotatedWeightSource : public runtime::WeightSource {
 public:
  /// UNIMPLEMENTED for an architecture other than the Llama family (LayerNorm models need their means moved first);
  /// INVALID_ARGUMENT naming `field` for a size without a rotation (RotationFor), or a given r1 / r2_per_layer that
  /// is not [hidden_size, hidden_size] / one [head_dim, head_dim] per layer; with r4, INVALID_ARGUMENT naming
  /// `field` (R4, intermediate_size) when the MLP width has no Hadamard matrix here.
  static absl::StatusOr<std::shared_ptr<RotatedWeightSource>> Create(std::shared_ptr<const runtime::WeightSource> base,
                                                                     const checkpoint::ModelConfig& model,
                                                                     const RotationOptions& options,
                                                                     const std::string& field);

  absl::StatusOr<at::Tensor> Get(const std::string& name, at::ScalarType dtype) const override;
  absl::StatusOr<at::Tensor> GetStored(const std::string& name) const override;
  bool Has(const std::string& name) const override;
  void Prefetch(const std::string& prefix) const override { base_->Prefetch(prefix); }
  std::string Location() const override { return base_->Location() + " (rotated)"; }

  /// The model as the rotated weights describe it: untied embeddings.
  const checkpoint::ModelConfig& model() const { return model_; }
  const at::Tensor& r1() const { return r1_; }
  /// R4's unnormalised +-1 Hadamard [intermediate_size, intermediate_size] (float64); undefined without r4.
  const at::Tensor& r4() const { return r4_; }

 private:
  RotatedWeightSource() = default;
  absl::StatusOr<at::Tensor> Compute(const std::string& name) const;
  absl::StatusOr<at::Tensor> Stored(const std::string& name) const;

  std::shared_ptr<const runtime::WeightSource> base_;
  checkpoint::ModelConfig original_, model_;
  at::Tensor r1_, r2_;  // float64
  at::Tensor r4_, r4_normalised_;  // float64: +-1, and / sqrt(n)
  std::vector<at::Tensor> r2_per_layer_;  // float64; replaces r2_ when not empty
  std::string embed_, final_norm_;
  mutable std::mutex mutex_;
  mutable std::map<std::string, at::Tensor> cached_;  // embedding, lm_head
};

}  // namespace quark::algorithms
