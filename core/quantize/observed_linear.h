// A linear that shows each input to a callback and computes as the linear it wraps: how the calibration passes
// (the GGUF importance matrix, imatrix_mse's importance) see a decoder layer's linear inputs without changing them.
#pragma once

#include <functional>
#include <memory>
#include <utility>

#include <ATen/ATen.h>

#include "core/runtime/linear.h"

namespace quark::quantize {

class ObservedLinear : public runtime::LinearLike {
 public:
  /// `on_input` sees every input [..., in] before the wrapped linear does; it may throw (the layer's forward fails).
  ObservedLinear(std::shared_ptr<runtime::LinearLike> inner, std::function<void(const at::Tensor&)> on_input)
      : inner_(std::move(inner)), on_input_(std::move(on_input)) {}
  at::Tensor forward(const at::Tensor& input) override {
    on_input_(input);
    return inner_->forward(input);
  }
  int64_t in_features() const override { return inner_->in_features(); }
  int64_t out_features() const override { return inner_->out_features(); }
  at::Tensor weight() const override { return inner_->weight(); }
  at::Tensor bias() const override { return inner_->bias(); }

 private:
  std::shared_ptr<runtime::LinearLike> inner_;
  std::function<void(const at::Tensor&)> on_input_;
};

}  // namespace quark::quantize
