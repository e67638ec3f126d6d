#include "core/runtime/linear.h"

namespace quark::runtime {

// The tensors are plain members, not registered parameters: the runtime never trains, and mmap views must
// stay out of autograd and of Module::to().
FloatLinear::FloatLinear(at::Tensor weight, at::Tensor bias) : weight_(std::move(weight)), bias_(std::move(bias)) {}

at::Tensor FloatLinear::forward(const at::Tensor& input) {
  if (input.scalar_type() != weight_.scalar_type()) {
    return at::linear(input, weight_.to(input.scalar_type()), bias_.defined() ? bias_.to(input.scalar_type()) : bias_);
  }
  return at::linear(input, weight_, bias_);
}

void FloatLinear::set_weight(at::Tensor weight) { weight_ = std::move(weight); }

void FloatLinear::set_bias(at::Tensor bias) { bias_ = std::move(bias); }

}  // namespace quark::runtime
