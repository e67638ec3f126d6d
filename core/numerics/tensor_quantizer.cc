#include "core/numerics/tensor_quantizer.h"

#include <algorithm>
#include <cmath>

#include "core/numerics/fake_quant.h"
#include "core/numerics/progressive_quant.h"
#include "core/numerics/quant_layout.h"
#include "kernels/cpu/nvfp4_kernels.h"

namespace quark {

absl::StatusOr<std::unique_ptr<TensorQuantizer>> TensorQuantizer::Create(const QuantSpec& spec, TensorRole role) {
  if (auto st = ValidateSpecForNumerics(spec); !st.ok()) return st;
  std::unique_ptr<TensorQuantizer> q(new TensorQuantizer(spec, role));
  if (spec.IsNvfp4() && spec.is_dynamic) {
    // NVFP4 input: dynamic groups under a static global scale, from the calibration amax (Quark's input_scale_2).
    QuantSpec amax_spec;
    amax_spec.dtype = DType::kFp8E4M3;
    amax_spec.qscheme = QScheme::kPerTensor;
    auto observer = MakeObserver(amax_spec, role);
    if (!observer.ok()) return observer.status();
    q->observer_ = std::move(*observer);
    return q;
  }
  if (spec.IsProgressive()) {  // #30 W4A8: Quark's SequentialQuantize observes stage 0, then stage 1 on its fp8 values
    auto first = MakeObserver(Fp8FirstStageSpec(), role);
    if (!first.ok()) return first.status();
    auto second = MakeObserver(SecondStageSpec(spec), role);
    if (!second.ok()) return second.status();
    q->observer_ = std::move(*first);
    q->second_observer_ = std::move(*second);
    return q;
  }
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
  if (auto st = observer_->Observe(x); !st.ok() || !second_observer_) return st;
  // W4A8: the running fp8 scale so far quantizes this batch for the int4 stage's observer, as Quark's does.
  auto p0 = observer_->ComputeParams();
  if (!p0.ok()) return p0.status();
  auto v = Fp8StageValues(x, p0->scale);
  if (!v.ok()) return v.status();
  return second_observer_->Observe(*v);
}

absl::Status TensorQuantizer::Freeze() {
  if (!observer_ || params_) return absl::OkStatus();
  if (spec_.IsNvfp4() && spec_.is_dynamic) {
    auto range = observer_->Range();
    if (!range.ok()) return range.status();
    const float amax = std::max(std::fabs(range->first.to(at::kFloat).item<float>()),
                                std::fabs(range->second.to(at::kFloat).item<float>()));
    params_ = QuantParams{at::Tensor(), at::Tensor(), at::scalar_tensor(kernels::Nvfp4GlobalScale(amax), at::kFloat)};
    return absl::OkStatus();
  }
  auto params = observer_->ComputeParams();
  if (!params.ok()) return params.status();
  if (second_observer_) {  // W4A8: int4 scales in scale / zero_point, the fp8 scale as global_scale
    auto second = second_observer_->ComputeParams();
    if (!second.ok()) return second.status();
    second->global_scale = params->scale.to(at::kFloat).reshape({});
    params = std::move(second);
  }
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
