#include "core/quantize/activation_quantizer.h"

#include "core/numerics/fake_quant.h"

namespace quark::quantize {

absl::StatusOr<std::unique_ptr<ActivationQuantizer>> ActivationQuantizer::Create(const QuantSpec& spec) {
  auto observer = TensorQuantizer::Create(spec, TensorRole::kActivation);
  if (!observer.ok()) return observer.status();
  std::unique_ptr<ActivationQuantizer> q(new ActivationQuantizer(spec));
  q->is_static_ = (*observer)->NeedsCalibration();
  if (q->is_static_) q->observer_ = *std::move(observer);
  return q;
}

absl::StatusOr<std::unique_ptr<ActivationQuantizer>> ActivationQuantizer::WithParams(const QuantSpec& spec,
                                                                                     QuantParams params) {
  auto q = Create(spec);
  if (!q.ok()) return q.status();
  if (!(*q)->is_static_) {
    return absl::InvalidArgumentError("activation spec is dynamic or a cast: it has no parameters to set");
  }
  (*q)->observer_.reset();
  (*q)->params_ = std::move(params);
  return q;
}

absl::Status ActivationQuantizer::Observe(const at::Tensor& x) {
  if (!is_static_ || params_ || !observer_) return absl::OkStatus();
  return observer_->Observe(x);
}

absl::Status ActivationQuantizer::Freeze() {
  if (!is_static_ || params_ || !observer_) return absl::OkStatus();
  if (auto status = observer_->Freeze(); !status.ok()) return status;
  params_ = *observer_->params();
  observer_.reset();  // the observer's statistics (histograms) are not needed any more
  return absl::OkStatus();
}

absl::StatusOr<at::Tensor> ActivationQuantizer::Apply(const at::Tensor& x) const {
  if (!is_static_) return FakeQuantizeDynamic(x, spec_, TensorRole::kActivation);
  if (!params_) return absl::FailedPreconditionError("static activation quantizer used before calibration froze it");
  return FakeQuantize(x, spec_, *params_, TensorRole::kActivation);
}

}  // namespace quark::quantize
