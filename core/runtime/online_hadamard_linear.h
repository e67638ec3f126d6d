// An online Hadamard on a linear's input (#35 item 4: SpinQuant's R4 on down_proj, compressed-tensors' `input`
// transform location): forward(x) = inner(x H / sqrt(n)), with inner's weight already W H / sqrt(n) so that the pair
// computes x W^T exactly in real arithmetic. The activations the inner linear sees (and quantizes) are the rotated
// ones, which is what R4 is for: the Hadamard spreads down_proj's outlier channels before the input quantizer.
//
// A DecoderLayer looks through the wrapper (decoder_layer.cc): FindLinear / NamedLinears give the inner linear and
// ReplaceLinear swaps the inner linear, so calibration observers, GPTQ's capture and the quantized linears all sit
// behind the Hadamard without knowing about it. Replacing a slot with an OnlineHadamardLinear installs the wrapper.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <ATen/ATen.h>

#include "absl/status/status.h"
#include "core/runtime/decoder_layer.h"
#include "core/runtime/linear.h"

namespace quark::runtime {

class OnlineHadamardLinear : public LinearLike {
 public:
  /// `hadamard` [in, in]: the unnormalised +-1 matrix (as compressed-tensors stores it; divided by sqrt(in) here, as
  /// its HadamardTransform and vLLM's do), in_features of `inner` wide.
  OnlineHadamardLinear(std::shared_ptr<LinearLike> inner, at::Tensor hadamard);

  /// inner(Transform(input)).
  at::Tensor forward(const at::Tensor& input) override;
  /// x H / sqrt(n) in float32 (compressed-tensors' default transform precision), back in x's dtype.
  at::Tensor Transform(const at::Tensor& input);

  int64_t in_features() const override { return inner_->in_features(); }
  int64_t out_features() const override { return inner_->out_features(); }
  /// The inner linear's weight: the rotated W H / sqrt(n) the inner linear multiplies by.
  at::Tensor weight() const override { return inner_->weight(); }
  at::Tensor bias() const override { return inner_->bias(); }

  const std::shared_ptr<LinearLike>& inner() const { return inner_; }
  void set_inner(std::shared_ptr<LinearLike> inner) { inner_ = std::move(inner); }
  /// The unnormalised +-1 matrix [in, in] (float64).
  const at::Tensor& hadamard() const { return hadamard_; }

 private:
  std::shared_ptr<LinearLike> inner_;
  at::Tensor hadamard_;    // float64 +-1
  at::Tensor normalised_;  // float32 H / sqrt(n) on the device of the last input
};

/// Puts the linear `relative_name` of `layer` behind an online Hadamard `hadamard` ([in, in], +-1). A slot already
/// behind one is left as it is when its matrix is the same (a layer's hooks may run more than once) and is an error
/// otherwise. INVALID_ARGUMENT naming the linear when it does not exist or the matrix is not [in, in].
absl::Status InstallOnlineHadamard(DecoderLayer& layer, const std::string& relative_name, const at::Tensor& hadamard);

/// The matrix of the online Hadamard on `relative_name`'s input, undefined when the slot has none.
at::Tensor OnlineHadamardOf(const DecoderLayer& layer, const std::string& relative_name);

}  // namespace quark::runtime
