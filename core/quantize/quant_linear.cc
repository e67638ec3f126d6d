#include "core/quantize/quant_linear.h"

#include <stdexcept>

#include "core/base/strings.h"

namespace quark::quantize {
namespace {

absl::Status Named(const absl::Status& status, const std::string& name, const char* field) {
  if (status.ok()) return status;
  return absl::Status(status.code(), StrCat(name, ".", field, ": ", std::string(status.message())));
}

absl::StatusOr<std::unique_ptr<ActivationQuantizer>> MakeActivation(const QuantSpec& spec,
                                                                    const std::optional<QuantParams>& params,
                                                                    const std::string& name, const char* field) {
  auto q = ActivationQuantizer::Create(spec);
  if (!q.ok()) return Named(q.status(), name, field);
  if (params && (*q)->is_static()) (*q)->SetParams(*params);
  return q;
}

}  // namespace

absl::StatusOr<std::shared_ptr<QuantLinear>> QuantLinear::Create(QuantLinearOptions options) {
  const std::string& name = options.name;
  if (!options.weight.defined() || options.weight.dim() != 2) {
    return absl::InvalidArgumentError(StrCat(name, ".weight: expected a 2-D [out, in] tensor"));
  }
  if (options.bias.defined() && (options.bias.dim() != 1 || options.bias.size(0) != options.weight.size(0))) {
    return absl::InvalidArgumentError(StrCat(name, ".bias: expected [", options.weight.size(0), "]"));
  }
  std::shared_ptr<QuantLinear> q(new QuantLinear());
  q->name_ = name;
  q->config_ = options.config;
  q->weight_ = options.weight;
  q->out_features_ = options.weight.size(0);
  q->in_features_ = options.weight.size(1);
  q->bias_ = options.bias;
  q->weight_prequantized_ = options.weight_prequantized;
  const LayerQuantConfig& c = options.config;
  if (c.weight && !options.weight_prequantized) {
    auto w = TensorQuantizer::Create(*c.weight, TensorRole::kWeight);
    if (!w.ok()) return Named(w.status(), name, "weight");
    q->weight_quantizer_ = *std::move(w);
  }
  if (c.bias && options.bias.defined() && !options.weight_prequantized) {
    auto b = TensorQuantizer::Create(*c.bias, TensorRole::kWeight);
    if (!b.ok()) return Named(b.status(), name, "bias");
    q->bias_quantizer_ = *std::move(b);
  }
  if (c.input_tensors) {
    auto in = MakeActivation(*c.input_tensors, options.input_params, name, "input_tensors");
    if (!in.ok()) return in.status();
    q->input_ = *std::move(in);
  }
  if (c.output_tensors) {
    auto out = MakeActivation(*c.output_tensors, options.output_params, name, "output_tensors");
    if (!out.ok()) return out.status();
    q->output_ = *std::move(out);
  }
  return q;
}

at::Tensor QuantLinear::forward(const at::Tensor& input) {
  if (frozen_) {
    auto y = QuantizedForward(input);
    if (!y.ok()) throw std::runtime_error(StrCat(name_, ": ", std::string(y.status().message())));
    return *std::move(y);
  }
  // Calibration runs the float layer (as Quark does inside a layer) while the observers see the tensors.
  if (input_) {
    if (auto s = input_->Observe(input); !s.ok()) throw std::runtime_error(StrCat(name_, ".input_tensors: ", std::string(s.message())));
  }
  const at::Tensor w = weight_.scalar_type() == input.scalar_type() ? weight_ : weight_.to(input.scalar_type());
  const at::Tensor b = !bias_.defined() || bias_.scalar_type() == input.scalar_type() ? bias_ : bias_.to(input.scalar_type());
  at::Tensor y = at::linear(input, w, b);
  if (output_) {
    if (auto s = output_->Observe(y); !s.ok()) throw std::runtime_error(StrCat(name_, ".output_tensors: ", std::string(s.message())));
  }
  return y;
}

absl::StatusOr<at::Tensor> QuantLinear::QuantizedForward(const at::Tensor& input) const {
  at::Tensor x = input;
  if (input_) {
    auto qx = input_->Apply(x);
    if (!qx.ok()) return Named(qx.status(), name_, "input_tensors");
    x = *std::move(qx);
  }
  const at::Tensor w = qweight_.scalar_type() == x.scalar_type() ? qweight_ : qweight_.to(x.scalar_type());
  const at::Tensor b = !qbias_.defined() || qbias_.scalar_type() == x.scalar_type() ? qbias_ : qbias_.to(x.scalar_type());
  at::Tensor y = at::linear(x, w, b);
  if (output_) {
    auto qy = output_->Apply(y);
    if (!qy.ok()) return Named(qy.status(), name_, "output_tensors");
    y = *std::move(qy);
  }
  return y;
}

absl::Status QuantLinear::Freeze() {
  if (frozen_) return absl::OkStatus();
  qweight_ = weight_;
  qbias_ = bias_;
  if (weight_quantizer_) {
    if (auto s = weight_quantizer_->Observe(weight_); !s.ok()) return Named(s, name_, "weight");
    if (auto s = weight_quantizer_->Freeze(); !s.ok()) return Named(s, name_, "weight");
    auto fq = weight_quantizer_->FakeQuantize(weight_);
    if (!fq.ok()) return Named(fq.status(), name_, "weight");
    qweight_ = *std::move(fq);
  }
  if (bias_quantizer_) {
    if (auto s = bias_quantizer_->Observe(bias_); !s.ok()) return Named(s, name_, "bias");
    if (auto s = bias_quantizer_->Freeze(); !s.ok()) return Named(s, name_, "bias");
    auto fq = bias_quantizer_->FakeQuantize(bias_);
    if (!fq.ok()) return Named(fq.status(), name_, "bias");
    qbias_ = *std::move(fq);
  }
  for (const auto& [q, field] : {std::pair{input_.get(), "input_tensors"}, std::pair{output_.get(), "output_tensors"}}) {
    if (q == nullptr) continue;
    if (auto s = q->Freeze(); !s.ok()) return Named(s, name_, field);
  }
  frozen_ = true;
  return absl::OkStatus();
}

absl::StatusOr<RealQuantized> QuantLinear::ExportWeight() const {
  if (!frozen_) return absl::FailedPreconditionError(StrCat(name_, ": export before Freeze"));
  if (!weight_quantizer_) return absl::FailedPreconditionError(StrCat(name_, ".weight: no weight quantizer"));
  if (!weight_.defined()) return absl::FailedPreconditionError(StrCat(name_, ".weight: float weight already released"));
  auto real = weight_quantizer_->Export(weight_);
  if (!real.ok()) return Named(real.status(), name_, "weight");
  return real;
}

void QuantLinear::ReleaseFloatWeight() {
  if (!frozen_) return;
  weight_ = at::Tensor();
  bias_ = at::Tensor();
}

}  // namespace quark::quantize
