// The linear layers of a model, behind one small interface so that a quantizer can swap a float Linear for a
// quantized one (or wrap one to observe its output, e.g. k_proj/v_proj for KV-cache calibration) by name.
#pragma once

#include <cstdint>
#include <memory>

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include "core/runtime/matmul_precision.h"

namespace quark::runtime {

/// y = x W^T + b, with W [out_features, in_features].
class LinearLike : public torch::nn::Module {
 public:
  /// [..., in_features] -> [..., out_features], in the input's dtype.
  virtual at::Tensor forward(const at::Tensor& input) = 0;
  virtual int64_t in_features() const = 0;
  virtual int64_t out_features() const = 0;
  /// The float weight [out, in] and bias [out] (undefined when none). A quantized implementation may return
  /// its dequantized weight; algorithms that edit weights (smoothing, rotation, GPTQ) work on FloatLinear.
  virtual at::Tensor weight() const = 0;
  virtual at::Tensor bias() const = 0;
};

/// The plain float Linear the runtime builds from checkpoint weights.
///
/// bf16 inputs on a CPU without native bf16 GEMMs (matmul_precision.h) are computed in float32: the first such
/// forward keeps a float32 copy of a bf16 weight (2x its bf16 bytes; ~800 MB for a Llama-2-7B layer) until the
/// linear is destroyed or its weight replaced. Streamed layers live one at a time, so there that copy is one
/// layer's worth, the same as a float32-compute run holds; CausalLm (full_model.h), which keeps every layer, holds
/// one per layer (it is meant for small models and tests). Not thread-safe (forward fills that cache).
class FloatLinear : public LinearLike {
 public:
  /// `weight` [out, in]; `bias` [out] or undefined. The tensors may be read-only mmap views: replace them
  /// (set_weight) rather than editing them in place, which would also leave the float32 copy stale.
  FloatLinear(at::Tensor weight, at::Tensor bias);
  at::Tensor forward(const at::Tensor& input) override;
  int64_t in_features() const override { return weight_.size(1); }
  int64_t out_features() const override { return weight_.size(0); }
  at::Tensor weight() const override { return weight_; }
  at::Tensor bias() const override { return bias_; }
  /// Replaces the weight (same shape) or bias, e.g. after smoothing; the new tensors are owned.
  void set_weight(at::Tensor weight);
  void set_bias(at::Tensor bias);

 private:
  at::Tensor weight_;
  at::Tensor bias_;
  // float32 copies for the float32-compute path of bf16 inputs; made when needed, reset by set_weight/bias.
  Float32Operands float32_;
};

}  // namespace quark::runtime
