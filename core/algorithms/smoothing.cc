#include "core/algorithms/smoothing.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "core/algorithms/moe_scaling.h"
#include "core/algorithms/search_batch.h"
#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/numerics/fake_quant.h"
#include "core/runtime/eager_powers.h"

namespace quark::algorithms {
namespace {

// The linears whose inputs the pairs read (each pair's `inp`, or its first linear), in pair order.
std::vector<std::string> InputLinears(const std::vector<ScalingLayer>& pairs) {
  std::vector<std::string> names;
  for (const auto& pair : pairs) {
    const std::string& name = pair.inp.empty() ? pair.layers[0] : pair.inp;
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return names;
}

const std::string& InspectedModule(const ScalingLayer& pair) {
  // Quark: no module2inspect means the pair's only linear.
  return pair.module2inspect.empty() ? pair.layers[0] : pair.module2inspect;
}

// The pairs checked, and resolved as the algorithms run them (ResolvedPair: an MoE block's routers added).
absl::StatusOr<std::vector<ScalingLayer>> CheckedPairs(const runtime::DecoderLayer& layer,
                                                       const std::vector<ScalingLayer>& pairs) {
  std::vector<ScalingLayer> resolved;
  for (size_t i = 0; i < pairs.size(); ++i) {
    QUARK_RETURN_IF_ERROR(CheckScalingPair(layer, pairs[i], StrCat("scaling_layers[", i, "]")));
    resolved.push_back(ResolvedPair(layer, pairs[i]));
  }
  return resolved;
}

// The pair's quantized readers: its linears without the MoE routers it scales exactly (they are never quantized).
std::vector<std::string> PairLinears(const runtime::DecoderLayer& layer, const ScalingLayer& pair) {
  std::vector<std::string> names;
  for (const auto& name : pair.layers) {
    if (layer.FindLinear(name) != nullptr) names.push_back(name);
  }
  return names;
}

// Swaps weights for a trial and puts the originals back however the trial ends.
class TrialWeights {
 public:
  explicit TrialWeights(runtime::DecoderLayer& layer) : layer_(layer) {}
  ~TrialWeights() {
    for (auto& [name, w] : originals_) (void)SetReaderWeight(layer_, name, w);
  }
  absl::Status Set(const std::string& name, at::Tensor weight) {
    if (!originals_.count(name)) {
      QUARK_ASSIGN_OR_RETURN(at::Tensor original, ReaderWeight(layer_, name));
      originals_[name] = original;
    }
    return SetReaderWeight(layer_, name, std::move(weight));
  }
  const at::Tensor& Original(const std::string& name) const { return originals_.at(name); }

 private:
  runtime::DecoderLayer& layer_;
  std::map<std::string, at::Tensor> originals_;
};

// The inspected module's output for one recorded input of a pair: a sample's [T, in], or for an MoE expert's linear
// the tokens of one routed call or of the coverage top-up (rows, not the sample length). An input kept in host memory
// crosses to the layer's device for the call.
absl::StatusOr<at::Tensor> InspectOutput(runtime::DecoderLayer& layer, const std::string& module, const at::Tensor& input,
                                         const ScalingInputs& in) {
  const int64_t rows = input.numel() / input.size(-1);
  const at::Tensor x = in.activations.Place(input).view({1, rows, input.size(-1)});
  return RunSubmodule(layer, module, x, in.context(rows));
}

// The outputs over every recorded input, kept where the activations are (the search's reference).
absl::StatusOr<std::vector<at::Tensor>> InspectOutputs(runtime::DecoderLayer& layer, const std::string& module,
                                                       const std::vector<at::Tensor>& inputs, const ScalingInputs& in) {
  std::vector<at::Tensor> outputs;
  outputs.reserve(inputs.size());
  for (const at::Tensor& input : inputs) {
    QUARK_ASSIGN_OR_RETURN(at::Tensor y, InspectOutput(layer, module, input, in));
    outputs.push_back(in.activations.Hold(y));
  }
  return outputs;
}

QuantParams PlacedParams(const QuantParams& params, const runtime::ActivationHome& activations) {
  const auto place = [&](const at::Tensor& t) { return t.defined() ? activations.Place(t) : t; };
  return QuantParams{place(params.scale), place(params.zero_point), place(params.global_scale)};
}

// Quark's candidate scales for a ratio: clamp(x^r, 1e-4), normalised by sqrt(max * min).
at::Tensor CandidateScales(const at::Tensor& x_stat, double ratio) {
  at::Tensor s = runtime::PowAsEager(x_stat, ratio).clamp_min(1e-4).view(-1);
  return s / (s.max() * s.min()).sqrt();
}

// mean over the recorded inputs' elements of |reference - module(input)|^p, as a float64 scalar on the layer's
// device. Each trial output is compared as it is computed, so a search holds one at a time, never every sample's; and
// nothing waits for the device: the per-sample sums are added there in float64, in sample order (the same additions
// a host loop over their values makes), and read once per search (BestTrial).
absl::StatusOr<at::Tensor> InspectLoss(runtime::DecoderLayer& layer, const std::string& module,
                                       const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& reference,
                                       double p, const ScalingInputs& in) {
  at::Tensor sum;
  int64_t count = 0;
  for (size_t i = 0; i < reference.size(); ++i) {
    QUARK_ASSIGN_OR_RETURN(const at::Tensor output, InspectOutput(layer, module, inputs[i], in));
    const at::Tensor d = (in.activations.Place(reference[i]) - output).to(at::kFloat).abs();
    const at::Tensor part = (p == 1.0 ? d : runtime::PowAsEager(d, p)).sum().to(at::kDouble);
    sum = sum.defined() ? sum + part : part;
    count += d.numel();
  }
  if (!sum.defined()) return at::full({}, std::numeric_limits<double>::quiet_NaN(), at::kDouble);
  return sum / static_cast<double>(count);
}

// InspectLoss for n trials at once, [n] float64 on the layer's device: each recorded input runs through the module
// once, expanded over the trials ([n, rows, in], no copy), with the pair's linears StackedTrialLinears.
absl::StatusOr<at::Tensor> InspectLossBatch(runtime::DecoderLayer& layer, const std::string& module,
                                            const std::vector<at::Tensor>& inputs,
                                            const std::vector<at::Tensor>& reference, double p, int64_t n,
                                            const ScalingInputs& in) {
  at::Tensor sum;
  int64_t count = 0;
  for (size_t i = 0; i < reference.size(); ++i) {
    const int64_t rows = inputs[i].numel() / inputs[i].size(-1);
    const at::Tensor x = in.activations.Place(inputs[i]).view({1, rows, inputs[i].size(-1)}).expand({n, rows, -1});
    QUARK_ASSIGN_OR_RETURN(const at::Tensor output, RunSubmodule(layer, module, x, in.context(rows)));
    const at::Tensor d = (in.activations.Place(reference[i]) - output).to(at::kFloat).abs();  // [n, rows, out]
    const at::Tensor part = (p == 1.0 ? d : runtime::PowAsEager(d, p)).sum({1, 2}).to(at::kDouble);
    sum = sum.defined() ? sum + part : part;
    count += d.numel() / n;
  }
  if (!sum.defined()) return at::full({n}, std::numeric_limits<double>::quiet_NaN(), at::kDouble);
  return sum / static_cast<double>(count);
}

// The trial with the lowest loss, the first of equal ones (Quark's argmin over its ratio loop); -1 when every loss is
// NaN. `losses` are in trial order, each one trial's scalar or a batch's [n]. The search's one wait for the device.
int BestTrial(const std::vector<at::Tensor>& losses) {
  if (losses.empty()) return -1;
  std::vector<at::Tensor> flat;
  for (const at::Tensor& loss : losses) flat.push_back(loss.view(-1));
  const at::Tensor values = at::cat(flat).to(at::kCPU);
  const auto value = values.accessor<double, 1>();
  double best_loss = std::numeric_limits<double>::infinity();
  int best = -1;
  for (int i = 0; i < static_cast<int>(values.size(0)); ++i) {
    if (value[i] < best_loss) {
      best_loss = value[i];
      best = i;
    }
  }
  return best;
}

}  // namespace

absl::StatusOr<std::vector<ScalingResult>> SmoothQuantLayer(runtime::DecoderLayer& layer, const ScalingInputs& in,
                                                            const std::vector<ScalingLayer>& given,
                                                            const SmoothQuantOptions& options,
                                                            std::vector<at::Tensor>* outputs) {
  QUARK_ASSIGN_OR_RETURN(const std::vector<ScalingLayer> pairs, CheckedPairs(layer, given));
  // The activation statistic: the pair's first linear's input, or in front of an MoE block the block's input (every
  // token, where each expert sees only those routed to it).
  const auto statistic_input = [&](const ScalingLayer& pair) {
    return FindMoeBlock(layer, pair.inp) != nullptr ? pair.inp : pair.layers[0];
  };
  std::vector<std::string> first_linears;
  for (const auto& pair : pairs) first_linears.push_back(statistic_input(pair));
  QUARK_ASSIGN_OR_RETURN(LinearInputs recorded,
                         RecordLinearInputs(layer, *in.samples, in.run, first_linears, false, outputs, in.min_expert_tokens,
                                            in.activations));
  if (in.coverage != nullptr && outputs != nullptr) *in.coverage = recorded.coverage;
  std::vector<ScalingResult> results;
  for (const auto& pair : pairs) {
    QUARK_ASSIGN_OR_RETURN(const at::Tensor first, LinearWeight(layer, PairLinears(layer, pair).front()));
    const at::ScalarType dtype = first.scalar_type();
    const at::Tensor act = recorded.abs_max.at(statistic_input(pair)).to(dtype);
    std::vector<at::Tensor> column_max;
    for (const auto& name : PairLinears(layer, pair)) {
      QUARK_ASSIGN_OR_RETURN(const at::Tensor w, LinearWeight(layer, name));
      column_max.push_back(std::get<0>(w.abs().max(0, true)));
    }
    const at::Tensor w_max = std::get<0>(at::cat(column_max, 0).max(0)).clamp_min(1e-5);
    const at::Tensor scales = (runtime::PowAsEager(act, options.alpha) / runtime::PowAsEager(w_max, 1.0 - options.alpha))
                                  .clamp_min(options.scale_clamp_min);
    if (at::isnan(scales).any().item<bool>()) {
      return absl::InternalError(StrCat(layer.prefix(), pair.prev_op, ": SmoothQuant scales contain NaN"));
    }
    results.push_back({pair, scales, -1});
  }
  for (const auto& r : results) QUARK_RETURN_IF_ERROR(ApplyScaling(layer, r.pair, r.scales, in.heads));
  return results;
}

absl::StatusOr<std::vector<ScalingResult>> AutoSmoothQuantLayer(runtime::DecoderLayer& layer, const ScalingInputs& in,
                                                                const std::vector<ScalingLayer>& given,
                                                                const LayerQuantSpecs& specs, const std::string& loss,
                                                                std::vector<at::Tensor>* outputs) {
  const double power = loss == "MSE" ? 2.0 : loss == "MAE" ? 1.0 : loss == "RMSE" ? 0.5 : -1.0;
  if (power < 0) {
    return absl::InvalidArgumentError(StrCat("compute_scale_loss: \"", loss, "\" is not MSE, MAE or RMSE"));
  }
  QUARK_ASSIGN_OR_RETURN(const std::vector<ScalingLayer> pairs, CheckedPairs(layer, given));
  QUARK_ASSIGN_OR_RETURN(LinearInputs recorded,
                         RecordLinearInputs(layer, *in.samples, in.run, InputLinears(pairs), true, outputs, in.min_expert_tokens,
                                            in.activations));
  if (in.coverage != nullptr && outputs != nullptr) *in.coverage = recorded.coverage;
  std::vector<ScalingResult> results;
  for (const auto& pair : pairs) {
    const std::string& inp = pair.inp.empty() ? pair.layers[0] : pair.inp;
    const std::vector<at::Tensor>& x = recorded.inputs.at(inp);
    // The statistics over every recorded token where the inputs are kept, then on the layer's device.
    const at::Tensor x_all = recorded.Concatenated(inp);
    const at::Tensor x_max = in.activations.Place(std::get<0>(x_all.abs().max(0)));
    QUARK_ASSIGN_OR_RETURN(const std::vector<at::Tensor> reference,
                           InspectOutputs(layer, InspectedModule(pair), x, in));
    // Quark quantizes the scaled input with the input quantizer of the pair's last linear (not a router: those are
    // listed last in front of an MoE block and never quantized).
    const auto spec_it = specs.find(PairLinears(layer, pair).back());
    const std::optional<QuantSpec> input_spec = spec_it == specs.end() ? std::nullopt : spec_it->second.input;
    std::vector<at::Tensor> candidates, losses;
    for (int i = 0; i < 10; ++i) {
      const double ratio = i / 10.0;
      const at::Tensor scales = CandidateScales(x_max, ratio);
      TrialWeights trial(layer);
      // Every reader takes s (the routers too: the block's input is x / s here, and routing must not change).
      for (const auto& name : pair.layers) {
        QUARK_ASSIGN_OR_RETURN(const at::Tensor w, ReaderWeight(layer, name));
        at::Tensor scaled = w * scales.to(w.scalar_type()).view({1, -1});
        auto s = specs.find(name);
        if (s != specs.end() && s->second.weight) {
          QUARK_ASSIGN_OR_RETURN(scaled, PseudoQuantizeWeight(scaled, *s->second.weight));
        }
        QUARK_RETURN_IF_ERROR(trial.Set(name, scaled));
      }
      // Q(x / s): a static spec's observer sees the whole calibration input at once, a dynamic one each token.
      std::vector<at::Tensor> x_q;
      std::optional<QuantParams> params;
      if (input_spec && !input_spec->is_dynamic) {
        // Observed where the inputs are kept (every token at once), then the parameters cross to the layer's device.
        QUARK_ASSIGN_OR_RETURN(const QuantParams observed,
                               ParamsOf(x_all / in.activations.Hold(scales).view({1, -1}), *input_spec,
                                        TensorRole::kActivation));
        params = PlacedParams(observed, in.activations);
      }
      for (const auto& xi : x) {
        at::Tensor scaled = in.activations.Place(xi) / scales.view({1, -1});
        if (input_spec) {
          QUARK_ASSIGN_OR_RETURN(scaled, params ? FakeQuantize(scaled, *input_spec, *params, TensorRole::kActivation)
                                                : FakeQuantizeDynamic(scaled, *input_spec, TensorRole::kActivation));
        }
        x_q.push_back(in.activations.Hold(scaled));
      }
      QUARK_ASSIGN_OR_RETURN(at::Tensor loss, InspectLoss(layer, InspectedModule(pair), x_q, reference, power, in));
      candidates.push_back(scales);
      losses.push_back(std::move(loss));
    }
    const int best = BestTrial(losses);
    if (best < 0) {
      return absl::InternalError(StrCat(layer.prefix(), pair.prev_op, ": every AutoSmoothQuant loss was NaN"));
    }
    results.push_back({pair, candidates[best], best / 10.0});
  }
  for (const auto& r : results) QUARK_RETURN_IF_ERROR(ApplyScaling(layer, r.pair, r.scales, in.heads));
  return results;
}

namespace {

// How many of AWQ's ratios one forward of `module` tries for the pair `linears` (1 without an allowance or where the
// module cannot run the trials batched).
absl::StatusOr<int> AwqTrialsPerBatch(const runtime::DecoderLayer& layer, const std::string& module,
                                      const std::vector<std::string>& linears, const std::vector<at::Tensor>& x,
                                      const AwqOptions& options, const ScalingInputs& in) {
  if (options.search_batch_bytes <= 0 || !BatchesTrials(layer, module, linears)) return 1;
  int64_t rows = 0;
  for (const at::Tensor& xi : x) rows = std::max(rows, xi.numel() / xi.size(-1));
  QUARK_ASSIGN_OR_RETURN(const at::Tensor first, LinearWeight(layer, linears.front()));
  return TrialsPerBatch(options.search_batch_bytes,
                        GridTrialBytes(layer, module, linears, rows, in.heads.heads, in.heads.kv_heads,
                                       SearchElementBytes(first.scalar_type())),
                        options.grid_size);
}

// AWQ's grid for one pair: the loss of each ratio's trial weights Q(W s) / s on the unscaled input (`applied[i]` the
// readers' scales of ratio i; the routers, exact under s, keep their weights and so their routing), one ratio at a
// time or `per_batch` at a time through StackedTrialLinears: a loss tensor per step ([] or [n]), in ratio order.
absl::StatusOr<std::vector<at::Tensor>> AwqGridLosses(runtime::DecoderLayer& layer,
                                                      const std::vector<std::string>& linears,
                                                      const std::string& module, const std::vector<at::Tensor>& x,
                                                      const std::vector<at::Tensor>& reference,
                                                      const std::vector<at::Tensor>& applied,
                                                      const LayerQuantSpecs& specs, int per_batch,
                                                      const ScalingInputs& in) {
  const auto trial_weight = [&](const std::string& name, const at::Tensor& w, size_t i) -> absl::StatusOr<at::Tensor> {
    const at::Tensor s = applied[i].to(w.scalar_type()).view({1, -1});
    const LinearQuantSpecs& spec = specs.at(name);
    QUARK_ASSIGN_OR_RETURN(const at::Tensor q, PseudoQuantizeWeight(w * s, *spec.weight, spec.weight_qdq));
    return q / s;
  };
  std::vector<at::Tensor> losses;
  for (size_t start = 0; start < applied.size(); start += per_batch) {
    if (per_batch == 1) {
      TrialWeights trial(layer);
      for (const auto& name : linears) {
        QUARK_ASSIGN_OR_RETURN(const at::Tensor w, LinearWeight(layer, name));
        QUARK_ASSIGN_OR_RETURN(at::Tensor q, trial_weight(name, w, start));
        QUARK_RETURN_IF_ERROR(trial.Set(name, std::move(q)));
      }
      QUARK_ASSIGN_OR_RETURN(at::Tensor loss, InspectLoss(layer, module, x, reference, 2.0, in));
      losses.push_back(std::move(loss));
      continue;
    }
    const int64_t n = static_cast<int64_t>(std::min<size_t>(per_batch, applied.size() - start));
    StackedTrials trials(layer);
    for (const auto& name : linears) {
      QUARK_ASSIGN_OR_RETURN(const at::Tensor w, LinearWeight(layer, name));
      at::Tensor stacked = at::empty({n, w.size(0), w.size(1)}, w.options());
      for (int64_t g = 0; g < n; ++g) {
        QUARK_ASSIGN_OR_RETURN(const at::Tensor q, trial_weight(name, w, start + static_cast<size_t>(g)));
        stacked[g].copy_(q);
      }
      QUARK_RETURN_IF_ERROR(trials.Install(name, std::move(stacked)));
    }
    QUARK_ASSIGN_OR_RETURN(at::Tensor loss, InspectLossBatch(layer, module, x, reference, 2.0, n, in));
    losses.push_back(std::move(loss));
  }
  return losses;
}

}  // namespace

absl::StatusOr<std::vector<ScalingResult>> AwqLayer(runtime::DecoderLayer& layer, const ScalingInputs& in,
                                                    const std::vector<ScalingLayer>& given,
                                                    const LayerQuantSpecs& specs, const AwqOptions& options,
                                                    std::vector<at::Tensor>* outputs,
                                                    std::map<std::string, at::Tensor>* clips) {
  QUARK_ASSIGN_OR_RETURN(const std::vector<ScalingLayer> pairs, CheckedPairs(layer, given));
  for (const auto& pair : pairs) {
    for (const auto& name : PairLinears(layer, pair)) {
      auto s = specs.find(name);
      if (s == specs.end() || !s->second.weight) {
        return absl::InvalidArgumentError(StrCat(layer.prefix(), name, ": AWQ scales a linear whose weight is not quantized"));
      }
    }
  }
  // Every quantized linear's input: the pairs read theirs, the clip search every linear's.
  std::vector<std::string> names;
  for (const auto& [name, spec] : specs) {
    if (spec.weight && layer.FindLinear(name)) names.push_back(name);
  }
  const std::vector<std::string> clipped = names;  // the quantized linears, before the blocks join the recording
  // In front of an MoE block the statistic is the block's input (every token).
  for (const auto& pair : pairs) {
    if (FindMoeBlock(layer, pair.inp) != nullptr && std::find(names.begin(), names.end(), pair.inp) == names.end()) {
      names.push_back(pair.inp);
    }
  }
  QUARK_ASSIGN_OR_RETURN(LinearInputs recorded, RecordLinearInputs(layer, *in.samples, in.run, names, true, outputs, in.min_expert_tokens,
                                            in.activations));
  if (in.coverage != nullptr && outputs != nullptr) *in.coverage = recorded.coverage;
  std::vector<ScalingResult> results;
  for (const auto& pair : pairs) {
    const std::string& inp = pair.inp.empty() ? pair.layers[0] : pair.inp;
    const std::vector<at::Tensor>& x = recorded.inputs.at(inp);
    const at::Tensor x_mean = in.activations.Place(recorded.Concatenated(inp).abs().mean(0));
    QUARK_ASSIGN_OR_RETURN(const std::vector<at::Tensor> reference,
                           InspectOutputs(layer, InspectedModule(pair), x, in));
    // Every ratio's scales, and what the readers take of them as ApplyScaling will (reduced per KV head under
    // grouped heads): the search then compares what would be applied.
    std::vector<at::Tensor> candidates, applied;
    for (int i = 0; i < options.grid_size; ++i) {
      candidates.push_back(CandidateScales(x_mean, static_cast<double>(i) / options.grid_size));
      QUARK_ASSIGN_OR_RETURN(at::Tensor reader, ReaderScales(layer, pair, candidates.back(), in.heads));
      applied.push_back(std::move(reader));
    }
    const std::vector<std::string> linears = PairLinears(layer, pair);
    const std::string& module = InspectedModule(pair);
    QUARK_ASSIGN_OR_RETURN(const int per_batch, AwqTrialsPerBatch(layer, module, linears, x, options, in));
    QUARK_ASSIGN_OR_RETURN(const std::vector<at::Tensor> losses,
                           AwqGridLosses(layer, linears, module, x, reference, applied, specs, per_batch, in));
    const int best = BestTrial(losses);
    if (best < 0) {
      return absl::InternalError(StrCat(layer.prefix(), pair.prev_op, ": every AWQ loss was NaN or infinite"));
    }
    const int batches = per_batch > 1 ? (options.grid_size + per_batch - 1) / per_batch : 0;
    results.push_back({pair, candidates[best], static_cast<double>(best) / options.grid_size, batches});
  }
  for (const auto& r : results) {
    // Under grouped KV heads o_proj's columns take the per-KV-head reduced scale, not r.scales.
    QUARK_ASSIGN_OR_RETURN(const at::Tensor applied, ReaderScales(layer, r.pair, r.scales, in.heads));
    QUARK_RETURN_IF_ERROR(ApplyScaling(layer, r.pair, r.scales, in.heads));
    // The scaled linears now read x / s: so must their recorded inputs, for the clip search. Readers that recorded
    // one shared input (q, k and v; gate and up) divide it once and go on sharing it; the originals stay alive until
    // the pair is done, so no other tensor takes their addresses meanwhile.
    std::map<const c10::TensorImpl*, std::pair<at::Tensor, at::Tensor>> divided;  // original -> (original, x / s)
    for (const auto& name : r.pair.layers) {
      auto it = recorded.inputs.find(name);
      if (it == recorded.inputs.end()) continue;
      for (auto& x : it->second) {
        auto& [original, scaled] = divided[x.unsafeGetTensorImpl()];
        if (!scaled.defined()) {
          original = x;
          scaled = x / applied.to(x.device(), x.scalar_type()).view({1, -1});
        }
        x = scaled;
      }
    }
  }
  for (const auto& name : clipped) {
    if (!checkpoint::AwqClipsLinear(name)) continue;
    QUARK_ASSIGN_OR_RETURN(const at::Tensor w, LinearWeight(layer, name));
    const LinearQuantSpecs& spec = specs.at(name);
    QUARK_ASSIGN_OR_RETURN(const at::Tensor max_val,
                           AwqBestClip(w, recorded.Concatenated(name), *spec.weight, options, spec.weight_qdq));
    const int64_t groups = max_val.size(1);
    const at::Tensor m = max_val.unsqueeze(-1);
    const at::Tensor wg = w.view({w.size(0), groups, -1});
    QUARK_RETURN_IF_ERROR(SetLinearWeight(layer, name, at::max(at::min(wg, m), -m).reshape(w.sizes()).contiguous()));
    if (clips) (*clips)[name] = max_val;
  }
  return results;
}

}  // namespace quark::algorithms
