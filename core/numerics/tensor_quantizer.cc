#include "core/numerics/tensor_quantizer.h"

#include "core/numerics/fake_quant.h"
#include "core/numerics/quant_layout.h"

namespace quark {

absl::StatusOr<std::unique_ptr<TensorQuantizer>> TensorQuantizer::Create(const QuantSpec& spec, TensorRole role) {
  if (auto st = ValidateSpecForNumerics(spec); !st.ok()) return st;
  std::unique_ptr<TensorQuantizer> q(new TensorQuantizer(spec, role));
  if (!spec.is_dynamic && !IsCastType(spec.dtype)) {
    auto observer = MakeObserver(spec, role);
    if (!observer.ok()) return observer.status();
    q->observer_ = std::move(*observer);
  }
  return q;
}

absl::Status TensorQuantizer::Observe(const at::Tensor& x) {
  if (!observer_) return absl::OkStatus();
  if (params_) return absl::FailedPreconditionError("observer: already frozen");
  return observer_->Observe(x);
}

absl::Status TensorQuantizer::Freeze() {
  if (!observer_ || params_) return absl::OkStatus();
  auto params = observer_->ComputeParams();
  if (!params.ok()) return params.status();
  params_ = std::move(*params);
  return absl::OkStatus();
}

absl::StatusOr<at::Tensor> TensorQuantizer::FakeQuantize(const at::Tensor& x) const {
  if (params_) return quark::FakeQuantize(x, spec_, *params_, role_);
  if (!observer_) return FakeQuantizeDynamic(x, spec_, role_);
  return absl::FailedPreconditionError("quantizer: static parameters not frozen (call Freeze)");
}

absl::StatusOr<RealQuantized> TensorQuantizer::Export(const at::Tensor& x) const {
  if (observer_ && !params_) {
    return absl::FailedPreconditionError("quantizer: static parameters not frozen (call Freeze)");
  }
  if (params_) return QuantizeReal(x, spec_, *params_, role_);
  auto params = ParamsOf(x, spec_, role_);
  if (!params.ok()) return params.status();
  return QuantizeReal(x, spec_, *params, role_);
}

}  // namespace quark
