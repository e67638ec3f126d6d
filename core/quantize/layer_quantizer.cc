#include "core/quantize/layer_quantizer.h"

#include <algorithm>
#include <cstring>

#include "core/base/strings.h"
#include "core/config/fused_group.h"
#include "core/numerics/nvfp4_quant.h"
#include "core/runtime/layer_forward.h"
#include "core/runtime/layer_streamer.h"

namespace quark::quantize {

std::map<std::string, float> SharedNvfp4Amax(const LayerPlan& plan, const runtime::DecoderLayer& layer) {
  std::map<std::string, float> amax;
  for (const runtime::NamedLinear& linear : layer.NamedLinears()) {
    const LayerAssignment* a = plan.Find(linear.name);
    if (a == nullptr || a->source == ConfigSource::kExcluded || !a->config.weight || !a->config.weight->IsNvfp4()) continue;
    float& m = amax[Nvfp4GlobalScaleKey(linear.name)];
    m = std::max(m, Nvfp4AmaxOf(linear.linear->weight()));
  }
  return amax;
}

absl::StatusOr<std::vector<std::shared_ptr<QuantLinear>>> LayerQuantizer::Install(runtime::DecoderLayer& layer,
                                                                                 const CalibratedParams* known) const {
  std::vector<std::shared_ptr<QuantLinear>> installed;
  const auto nvfp4_amax = SharedNvfp4Amax(plan_, layer);
  for (const runtime::NamedLinear& linear : layer.NamedLinears()) {
    const LayerAssignment* assignment = plan_.Find(linear.name);
    if (assignment == nullptr) {
      return absl::InvalidArgumentError(StrCat("module ", linear.name, " is not in the layer plan of the model"));
    }
    if (assignment->source == ConfigSource::kExcluded || assignment->config.Empty()) continue;
    QuantLinearOptions options;
    options.name = linear.name;
    options.config = assignment->config;
    options.weight = linear.linear->weight();
    options.bias = linear.linear->bias();
    if (known != nullptr) {
      if (auto it = known->find(linear.name); it != known->end()) {
        options.input_params = it->second.input;
        options.output_params = it->second.output;
        options.weight_params = it->second.weight;
      }
    }
    const auto& w = assignment->config.weight;
    if (w && w->IsNvfp4() && !options.weight_params) {
      auto params = Nvfp4ParamsOf(options.weight, *w, nvfp4_amax.at(Nvfp4GlobalScaleKey(linear.name)));
      if (!params.ok()) {
        return absl::InvalidArgumentError(StrCat(linear.name, ".weight: ", std::string(params.status().message())));
      }
      options.weight_params = *std::move(params);
    }
    auto q = QuantLinear::CreateFor(std::move(options), linear.linear);  // streams with a streamed expert
    if (!q.ok()) return q.status();
    if (auto s = layer.ReplaceLinear(linear.relative_name, *q); !s.ok()) return s;
    installed.push_back(*std::move(q));
  }
  return installed;
}

namespace {

bool NeedsCalibration(const std::vector<std::shared_ptr<QuantLinear>>& linears) {
  for (const auto& q : linears) {
    for (ActivationQuantizer* a : {q->input_quantizer(), q->output_quantizer()}) {
      if (a != nullptr && a->is_static() && !a->frozen()) return true;
    }
  }
  return false;
}

absl::Status FreezeAll(const std::vector<std::shared_ptr<QuantLinear>>& linears) {
  for (const auto& q : linears) {
    if (auto s = q->Freeze(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::shared_ptr<QuantLinear>>> LayerQuantizer::Calibrate(
    runtime::DecoderLayer& layer, const std::vector<at::Tensor>& inputs, runtime::TransformerModel& model,
    const CalibratedParams* known, std::vector<runtime::ExpertCoverage>* coverage) const {
  auto linears = Install(layer, known);
  if (!linears.ok()) return linears.status();
  if (NeedsCalibration(*linears)) {
    if (inputs.empty()) {
      return absl::FailedPreconditionError(StrCat(layer.prefix(), ": static activations need calibration samples"));
    }
    std::vector<runtime::ExpertCoverage> counts;
    try {
      layer.BeginCalibration(min_expert_tokens_);
      (void)runtime::ForwardLayerSamples(layer, inputs, model);  // streamed experts: one load each
      // The experts short of tokens run on their best-ranked other tokens before the observers freeze.
      counts = layer.FinishCalibration();
    } catch (const std::exception& error) {
      try {
        (void)layer.FinishCalibration();  // ends the recording; the run fails anyway
      } catch (const std::exception&) {
      }
      return runtime::TorchErrorToStatus(error, StrCat("calibration of ", layer.prefix()));
    }
    if (auto s = CheckExpertCoverage(counts, *linears, min_expert_tokens_); !s.ok()) return s;
    if (coverage != nullptr) *coverage = std::move(counts);
  }
  if (auto s = FreezeAll(*linears); !s.ok()) return s;
  if (auto s = ShareKvCacheScales(*linears, config_); !s.ok()) return s;
  return linears;
}

absl::StatusOr<std::vector<std::shared_ptr<QuantLinear>>> LayerQuantizer::Apply(runtime::DecoderLayer& layer,
                                                                               const CalibratedParams& params) const {
  auto linears = Install(layer, &params);
  if (!linears.ok()) return linears.status();
  if (NeedsCalibration(*linears)) {
    return absl::FailedPreconditionError(StrCat(layer.prefix(), ": no calibrated parameters for a static activation"));
  }
  if (auto s = FreezeAll(*linears); !s.ok()) return s;
  return linears;
}

absl::Status ShareKvCacheScales(const std::vector<std::shared_ptr<QuantLinear>>& linears, const Config& config) {
  std::vector<ActivationQuantizer*> kv;
  for (const auto& q : linears) {
    ActivationQuantizer* out = q->output_quantizer();
    if (out != nullptr && out->is_static() && KvCacheSpecFor(config, q->name())) kv.push_back(out);
  }
  if (kv.empty()) return absl::OkStatus();
  at::Tensor shared;
  for (ActivationQuantizer* q : kv) {
    if (q->params() == nullptr) return absl::FailedPreconditionError("KV-cache scale shared before calibration");
    if (q->params()->scale.numel() != 1) {
      return absl::InvalidArgumentError(StrCat("KV-cache output scale must be per tensor, got ", q->params()->scale.numel(),
                                               " scales"));
    }
    shared = shared.defined() ? at::maximum(shared, q->params()->scale) : q->params()->scale.clone();
  }
  shared = shared.clamp_min(static_cast<double>(config.min_kv_scale));
  for (ActivationQuantizer* q : kv) {
    QuantParams params = *q->params();
    params.scale = shared.to(params.scale.scalar_type()).reshape(params.scale.sizes());
    q->SetParams(std::move(params));
  }
  return absl::OkStatus();
}

CalibratedParams SnapshotParams(const std::vector<std::shared_ptr<QuantLinear>>& linears) {
  CalibratedParams out;
  for (const auto& q : linears) {
    ModuleParams p;
    if (q->input_quantizer() && q->input_quantizer()->params()) p.input = *q->input_quantizer()->params();
    if (q->output_quantizer() && q->output_quantizer()->params()) p.output = *q->output_quantizer()->params();
    if (p.input || p.output) out[q->name()] = std::move(p);
  }
  return out;
}

}  // namespace quark::quantize
