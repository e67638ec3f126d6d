#include "core/quantize/quant_linear.h"

#include <ostream>
#include <stdexcept>

#include "core/base/strings.h"
#include "core/runtime/matmul_precision.h"

namespace quark::quantize {

absl::StatusOr<std::shared_ptr<QuantLinear>> QuantLinear::Create(QuantLinearOptions options) {
  const std::string& name = options.name;
  if (!options.weight.defined() || options.weight.dim() != 2) {
    return absl::InvalidArgumentError(StrCat(name, ".weight: expected a 2-D [out, in] tensor"));
  }
  if (options.bias.defined() && (options.bias.dim() != 1 || options.bias.size(0) != options.weight.size(0))) {
    return absl::InvalidArgumentError(StrCat(name, ".bias: expected [", options.weight.size(0), "]"));
  }
  std::shared_ptr<QuantLinear> q(new QuantLinear());
  q->out_features_ = options.weight.size(0);
  q->in_features_ = options.weight.size(1);
  ModuleQuantizersOptions m;
  m.name = options.name;
  m.config = std::move(options.config);
  m.weight = std::move(options.weight);
  m.bias = std::move(options.bias);
  m.weight_prequantized = options.weight_prequantized;
  m.weight_params = std::move(options.weight_params);
  m.input_params = std::move(options.input_params);
  m.output_params = std::move(options.output_params);
  auto quantizers = ModuleQuantizers::Create(std::move(m));
  if (!quantizers.ok()) return quantizers.status();
  q->q_ = *std::move(quantizers);
  return q;
}

absl::StatusOr<std::shared_ptr<QuantLinear>> QuantLinear::CreateFor(QuantLinearOptions options,
                                                                     const std::shared_ptr<runtime::LinearLike>& replaced) {
  auto q = Create(std::move(options));
  if (!q.ok()) return q.status();
  if (auto streamed = std::dynamic_pointer_cast<runtime::StreamedLinear>(replaced)) {
    (*q)->streamed_ = streamed;
    // Registered after the float linear: an expert's load materializes that one first, which this one then reads.
    streamed->residency()->Register(streamed->expert(), *q);
  }
  return q;
}

void QuantLinear::Resident() const {
  if (streamed_) streamed_->residency()->Acquire(streamed_->expert());
}

void QuantLinear::MaterializeWeights() {
  if (!streamed_ || q_->holds_weights()) return;
  streamed_->MaterializeWeights();
  if (auto s = q_->RestoreWeights(streamed_->weight(), streamed_->bias()); !s.ok()) {
    throw std::runtime_error(std::string(s.message()));
  }
}

void QuantLinear::ReleaseWeights() {
  if (!streamed_) return;
  q_->DropWeights();
  float32_.Reset();
}

absl::Status QuantLinear::Freeze() {
  try {
    Resident();
  } catch (const std::exception& error) {
    return absl::InternalError(StrCat(name(), ": ", error.what()));
  }
  return q_->Freeze();
}

absl::StatusOr<RealQuantized> QuantLinear::ExportWeight() const {
  try {
    Resident();
  } catch (const std::exception& error) {
    return absl::InternalError(StrCat(name(), ": ", error.what()));
  }
  return q_->ExportWeight();
}

at::Tensor QuantLinear::forward(const at::Tensor& input) {
  Resident();
  // Calibrating: Input/Output observe and the weight is the float one; frozen: all three are fake-quantized.
  const at::Tensor x = q_->Input(input);
  if (runtime::MatmulInFloat32(x)) {
    if (float32_frozen_ != frozen()) {  // Freeze swapped the float weight for the fake-quantized one
      float32_.Reset();
      float32_frozen_ = frozen();
    }
    return q_->Output(float32_.Linear(x, q_->weight(), q_->bias()));
  }
  return q_->Output(at::linear(x, q_->Weight(x.scalar_type()), q_->Bias(x.scalar_type())));
}

void QuantLinear::pretty_print(std::ostream& stream) const {
  stream << "QuantLinear(" << q_->name() << ", in_features=" << in_features_ << ", out_features=" << out_features_
         << ")";
}

}  // namespace quark::quantize
