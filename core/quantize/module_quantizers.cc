#include "core/quantize/module_quantizers.h"

#include <stdexcept>

#include "core/base/strings.h"
#include "core/export/scale_dtype.h"
#include "core/numerics/quant_layout.h"

namespace quark::quantize {
namespace {

absl::Status Named(const absl::Status& status, const std::string& name, const char* field) {
  if (status.ok()) return status;
  return absl::Status(status.code(), StrCat(name, ".", field, ": ", std::string(status.message())));
}

// A weight or bias quantizer whose spec fits the tensor's shape: checked here, before any calibration runs, rather
// than at Freeze after a whole calibration pass.
absl::StatusOr<std::unique_ptr<TensorQuantizer>> MakeTensorQuantizer(const QuantSpec& spec, const at::Tensor& x,
                                                                     const std::string& name, const char* field) {
  if (!x.defined()) return absl::InvalidArgumentError(StrCat(name, ".", field, ": the module has no such tensor"));
  if (auto layout = ResolveLayout(spec, TensorRole::kWeight, x.sizes()); !layout.ok()) {
    return Named(layout.status(), name, field);
  }
  auto q = TensorQuantizer::Create(spec, TensorRole::kWeight);
  if (!q.ok()) return Named(q.status(), name, field);
  return q;
}

absl::StatusOr<std::unique_ptr<ActivationQuantizer>> MakeActivation(const QuantSpec& spec,
                                                                    const std::optional<QuantParams>& params,
                                                                    const std::string& name, const char* field) {
  auto q = ActivationQuantizer::Create(spec);
  if (!q.ok()) return Named(q.status(), name, field);
  if (params && (*q)->is_static()) (*q)->SetParams(*params);
  return q;
}

at::Tensor InDtype(const at::Tensor& t, at::ScalarType dtype) {
  return !t.defined() || t.scalar_type() == dtype ? t : t.to(dtype);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModuleQuantizers>> ModuleQuantizers::Create(ModuleQuantizersOptions options) {
  const std::string& name = options.name;
  const LayerQuantConfig& c = options.config;
  std::unique_ptr<ModuleQuantizers> q(new ModuleQuantizers());
  q->name_ = name;
  q->config_ = c;
  q->weight_ = options.weight;
  q->bias_ = options.bias;
  if (c.weight && !options.weight_prequantized) {
    // Per-group int4/uint4 weights run with the 16-bit scales the export stores (scale_dtype.h), so that the
    // fake-quantized weight and a reloaded export agree bit for bit.
    const at::ScalarType dtype = options.weight.defined() ? options.weight.scalar_type() : at::kFloat;
    auto w = MakeTensorQuantizer(exporter::WeightSpecForExport(*c.weight, dtype), options.weight, name, "weight");
    if (!w.ok()) return w.status();
    if (options.weight_params) (*w)->SetParams(*std::move(options.weight_params));
    q->weight_quantizer_ = *std::move(w);
  }
  // A bias spec on a module without a bias is dropped, as Quark does (its quant_config.bias becomes None).
  if (c.bias && options.bias.defined() && !options.weight_prequantized) {
    auto b = MakeTensorQuantizer(*c.bias, options.bias, name, "bias");
    if (!b.ok()) return b.status();
    q->bias_quantizer_ = *std::move(b);
  }
  for (const auto& [spec, params, field, slot] :
       {std::tuple{&c.input_tensors, &options.input_params, "input_tensors", &q->input_},
        std::tuple{&c.output_tensors, &options.output_params, "output_tensors", &q->output_}}) {
    if (!spec->has_value()) continue;
    if (!options.quantize_activations) {
      q->ignored_fields_.push_back(field);
      continue;
    }
    auto a = MakeActivation(**spec, *params, name, field);
    if (!a.ok()) return a.status();
    *slot = *std::move(a);
  }
  return q;
}

at::Tensor ModuleQuantizers::Activation(ActivationQuantizer* quantizer, const at::Tensor& x, const char* field) {
  if (quantizer == nullptr) return x;
  if (frozen_) {
    auto y = quantizer->Apply(x);
    if (!y.ok()) throw std::runtime_error(StrCat(name_, ".", field, ": ", std::string(y.status().message())));
    return *std::move(y);
  }
  // Calibration runs the float module (as Quark does) while the observer sees the tensor.
  if (auto s = quantizer->Observe(x); !s.ok()) {
    throw std::runtime_error(StrCat(name_, ".", field, ": ", std::string(s.message())));
  }
  return x;
}

at::Tensor ModuleQuantizers::Input(const at::Tensor& x) { return Activation(input_.get(), x, "input_tensors"); }

at::Tensor ModuleQuantizers::Output(const at::Tensor& y) { return Activation(output_.get(), y, "output_tensors"); }

at::Tensor ModuleQuantizers::Weight(at::ScalarType dtype) const { return InDtype(weight(), dtype); }

at::Tensor ModuleQuantizers::Bias(at::ScalarType dtype) const { return InDtype(bias(), dtype); }

bool ModuleQuantizers::NeedsCalibration() const {
  for (const ActivationQuantizer* a : {input_.get(), output_.get()}) {
    if (a != nullptr && a->is_static() && !a->frozen()) return true;
  }
  return false;
}

absl::Status ModuleQuantizers::FreezeTensor(TensorQuantizer* quantizer, const at::Tensor& x, const char* field,
                                            at::Tensor& out) {
  if (!quantizer->frozen()) {  // known parameters (GPTQ) are used as they are
    if (auto s = quantizer->Observe(x); !s.ok()) return Named(s, name_, field);
    if (auto s = quantizer->Freeze(); !s.ok()) return Named(s, name_, field);
  }
  auto fq = quantizer->FakeQuantize(x);
  if (!fq.ok()) return Named(fq.status(), name_, field);
  out = *std::move(fq);
  return absl::OkStatus();
}

void ModuleQuantizers::DropWeights() {
  weight_ = bias_ = qweight_ = qbias_ = at::Tensor();
}

absl::Status ModuleQuantizers::RestoreWeights(at::Tensor weight, at::Tensor bias) {
  if (weight_.defined()) return absl::OkStatus();
  weight_ = std::move(weight);
  bias_ = std::move(bias);
  if (!frozen_) return absl::OkStatus();
  return FakeQuantizeWeights();
}

absl::Status ModuleQuantizers::FakeQuantizeWeights() {
  at::Tensor qweight = weight_, qbias = bias_;
  if (weight_quantizer_) {
    if (auto s = FreezeTensor(weight_quantizer_.get(), weight_, "weight", qweight); !s.ok()) return s;
  }
  if (bias_quantizer_) {
    if (auto s = FreezeTensor(bias_quantizer_.get(), bias_, "bias", qbias); !s.ok()) return s;
  }
  qweight_ = std::move(qweight);
  qbias_ = std::move(qbias);
  return absl::OkStatus();
}

absl::Status ModuleQuantizers::Freeze() {
  if (frozen_) return absl::OkStatus();
  // Activations first: the likely failure (a static activation that saw no batch) then leaves the weight
  // quantizers untouched, so calibrating more and freezing again starts from a clean state.
  for (const auto& [q, field] : {std::pair{input_.get(), "input_tensors"}, std::pair{output_.get(), "output_tensors"}}) {
    if (q == nullptr) continue;
    if (auto s = q->Freeze(); !s.ok()) return Named(s, name_, field);
  }
  if (auto s = FakeQuantizeWeights(); !s.ok()) return s;
  frozen_ = true;
  return absl::OkStatus();
}

absl::StatusOr<RealQuantized> ModuleQuantizers::ExportWeight() const {
  if (!frozen_) return absl::FailedPreconditionError(StrCat(name_, ": export before Freeze"));
  if (!weight_quantizer_) return absl::FailedPreconditionError(StrCat(name_, ".weight: no weight quantizer"));
  if (!weight_.defined()) return absl::FailedPreconditionError(StrCat(name_, ".weight: float weight already released"));
  auto real = weight_quantizer_->Export(weight_);
  if (!real.ok()) return Named(real.status(), name_, "weight");
  return real;
}

void ModuleQuantizers::ReleaseFloatWeight() {
  if (!frozen_) return;
  weight_ = at::Tensor();
  bias_ = at::Tensor();
}

}  // namespace quark::quantize
