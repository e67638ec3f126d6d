#include "core/runtime/linear.h"

#include "core/runtime/matmul_precision.h"

namespace quark::runtime {

// The tensors are plain members, not registered parameters: the runtime never trains, and mmap views must
// stay out of autograd and of Module::to().
FloatLinear::FloatLinear(at::Tensor weight, at::Tensor bias) : weight_(std::move(weight)), bias_(std::move(bias)) {}

at::Tensor FloatLinear::forward(const at::Tensor& input) {
  if (MatmulInFloat32(input)) return float32_.Linear(input, weight_, bias_);
  if (input.scalar_type() != weight_.scalar_type()) {
    return at::linear(input, weight_.to(input.scalar_type()), bias_.defined() ? bias_.to(input.scalar_type()) : bias_);
  }
  return at::linear(input, weight_, bias_);
}

void FloatLinear::set_weight(at::Tensor weight) {
  weight_ = std::move(weight);
  float32_.Reset();
}

void FloatLinear::set_bias(at::Tensor bias) {
  bias_ = std::move(bias);
  float32_.Reset();
}

}  // namespace quark::runtime
