#include "core/quantize/imatrix_mse_pass.h"

#include <string>

#include "core/base/strings.h"
#include "core/export/scale_dtype.h"
#include "core/quantize/observed_linear.h"
#include "core/runtime/layer_forward.h"
#include "core/runtime/layer_streamer.h"

namespace quark::quantize {
namespace {

const QuantSpec* ImatrixWeightSpec(const LayerAssignment* a) {
  if (a == nullptr || a->source == ConfigSource::kExcluded || !a->config.weight) return nullptr;
  return a->config.weight->observer == ObserverKind::kImatrixMse ? &*a->config.weight : nullptr;
}

// One observed linear: Σx² per input column, float64 on the input's device.
struct Importance {
  std::shared_ptr<runtime::LinearLike> original;
  std::string relative_name;
  at::Tensor sum2;
};

}  // namespace

bool UsesImatrixMse(const LayerPlan& plan) {
  for (const LayerAssignment& a : plan.layers) {
    if (ImatrixWeightSpec(&a) != nullptr) return true;
  }
  return false;
}

absl::StatusOr<CalibratedParams> ImatrixMsePass::Run(runtime::DecoderLayer& layer,
                                                     const std::vector<at::Tensor>& samples,
                                                     runtime::TransformerModel& model) const {
  last_importance_.clear();
  std::map<std::string, std::shared_ptr<Importance>> observed;  // by full module name
  for (const runtime::NamedLinear& l : layer.NamedLinears()) {
    if (ImatrixWeightSpec(plan_.Find(l.name)) == nullptr) continue;
    auto importance = std::make_shared<Importance>(Importance{l.linear, l.relative_name, at::Tensor()});
    auto wrapper = std::make_shared<ObservedLinear>(l.linear, [importance](const at::Tensor& input) {
      const at::Tensor s = input.reshape({-1, input.size(-1)}).to(at::kDouble).square().sum(0);
      importance->sum2 = importance->sum2.defined() ? importance->sum2.add(s) : s;
    });
    if (auto s = layer.ReplaceLinear(l.relative_name, wrapper); !s.ok()) return s;
    observed[l.name] = importance;
  }
  if (observed.empty()) return CalibratedParams{};
  absl::Status forward = samples.empty()
                             ? absl::FailedPreconditionError(StrCat(layer.prefix(), ": imatrix_mse weights need "
                                                                                    "calibration samples"))
                             : absl::OkStatus();
  try {
    for (size_t i = 0; forward.ok() && i < samples.size(); ++i) {
      runtime::ForwardSample(layer, samples[i], model);
    }
  } catch (const std::exception& error) {
    forward = runtime::TorchErrorToStatus(error, StrCat("imatrix_mse forward of ", layer.prefix()));
  }
  for (const auto& [name, importance] : observed) {  // the layer's own linears back, whatever happened
    if (auto s = layer.ReplaceLinear(importance->relative_name, importance->original); !s.ok()) return s;
  }
  if (!forward.ok()) return forward;
  CalibratedParams out;
  for (const auto& [name, importance] : observed) {
    const at::Tensor weight = importance->original->weight();
    const QuantSpec spec = exporter::WeightSpecForExport(*ImatrixWeightSpec(plan_.Find(name)), weight.scalar_type());
    // An MoE expert no token reached has no importance: the plain (unweighted) MSE search, as llm-compressor falls
    // back to for an all-zero importance.
    const at::Tensor sum2 =
        importance->sum2.defined() ? importance->sum2 : at::zeros({weight.size(1)}, weight.options().dtype(at::kDouble));
    auto params = ImatrixMseParams(weight, sum2, spec, options_);
    if (!params.ok()) {
      return absl::InvalidArgumentError(StrCat(name, ".weight (observer imatrix_mse): ", std::string(params.status().message())));
    }
    out[name].weight = *std::move(params);
    last_importance_[name] = sum2;
  }
  return out;
}

}  // namespace quark::quantize
