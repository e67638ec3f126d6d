#include "core/algorithms/gptq_layer.h"

#include <memory>
#include <set>

#include "core/algorithms/hessian.h"
#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/runtime/layer_streamer.h"
#include "core/runtime/linear.h"
#include "core/runtime/moe_block.h"

namespace quark::algorithms {
namespace {

// Thrown by a capturing linear once it has seen its input: the rest of the layer's forward is not needed.
struct StopForward {};

// Stands in for a linear during a capture pass: adds its input to the Hessian, then stops the forward. A routed
// (MoE expert) linear lets the forward go on instead: a later sample, or the top-up, may bring it more tokens.
class CapturingLinear : public runtime::LinearLike {
 public:
  CapturingLinear(std::shared_ptr<runtime::LinearLike> inner, HessianAccumulator* hessian, bool routed)
      : inner_(std::move(inner)), hessian_(hessian), routed_(routed) {}
  at::Tensor forward(const at::Tensor& input) override {
    const absl::Status added = hessian_->Add(input);
    if (status_.ok()) status_ = added;
    if (routed_) return inner_->forward(input);
    throw StopForward{};
  }
  int64_t in_features() const override { return inner_->in_features(); }
  int64_t out_features() const override { return inner_->out_features(); }
  at::Tensor weight() const override { return inner_->weight(); }
  at::Tensor bias() const override { return inner_->bias(); }
  const absl::Status& status() const { return status_; }

 private:
  std::shared_ptr<runtime::LinearLike> inner_;
  HessianAccumulator* hessian_;
  bool routed_;
  absl::Status status_;
};

// A Hessian and the quantized modules upstream of its input when it was collected: it stays valid while that set
// does not change. The first module to need it turns it into GPTQ's factor (in place), which the others reuse.
struct CachedHessian {
  at::Tensor hessian;                        // until the factor is taken
  std::shared_ptr<const GptqFactor> factor;  // from then on
  std::set<std::string> upstream;
  at::Tensor diagonal;  // diag(hessian), from when the factor is taken
};

class LayerGptq {
 public:
  LayerGptq(runtime::DecoderLayer& layer, const std::vector<at::Tensor>& samples, const LayerForward& forward,
            const GptqLayerPlan& plan, const GptqLayerCallbacks& callbacks)
      : layer_(layer), samples_(samples), forward_(forward), plan_(plan), callbacks_(callbacks) {}

  /// Captures the Hessian of the target's input unless a valid one is cached.
  absl::Status EnsureHessian(const GptqTarget& target);
  /// GPTQ's factor of the target's input (after EnsureHessian), computed once per Hessian.
  absl::StatusOr<std::shared_ptr<const GptqFactor>> FactorOf(const GptqTarget& target, const GptqOptions& options);
  /// MoE: the Hessians of a step's routed targets (every expert's up_proj, ...) in one capture pass instead of one
  /// pass each. The same Hessians: a routed capture lets the forward go on, so each sees what it would see alone.
  /// Capture() is for the linears on every forward's path.
  absl::Status CaptureRouted(const std::vector<GptqTarget>& step);
  absl::Status SetWeight(const GptqTarget& target, at::Tensor weight);
  void MarkDone(const std::string& relative_name, const std::string& input) { done_[relative_name] = input; }
  /// The Hessian diagonal of the target's input (after FactorOf for a target with its own quantizer).
  at::Tensor DiagonalOf(const GptqTarget& target) const { return cache_.at(target.input).diagonal; }
  /// Drops the cached Hessians that no step from `next_step` on reads (a K x K matrix each).
  void ForgetUnused(size_t next_step);

 private:
  std::set<std::string> UpstreamOf(const std::string& input) const;
  absl::StatusOr<at::Tensor> Capture(const GptqTarget& target);

  runtime::DecoderLayer& layer_;
  const std::vector<at::Tensor>& samples_;
  const LayerForward& forward_;
  const GptqLayerPlan& plan_;
  const GptqLayerCallbacks& callbacks_;
  std::map<std::string, std::string> done_;  // quantized module -> its input
  std::map<std::string, CachedHessian> cache_;
};

void LayerGptq::ForgetUnused(size_t next_step) {
  std::set<std::string> needed;
  for (size_t s = next_step; s < plan_.steps.size(); ++s) {
    for (const GptqTarget& target : plan_.steps[s]) needed.insert(target.input);
  }
  for (auto it = cache_.begin(); it != cache_.end();) it = needed.count(it->first) ? std::next(it) : cache_.erase(it);
}

std::set<std::string> LayerGptq::UpstreamOf(const std::string& input) const {
  std::set<std::string> earlier;
  for (const std::string& name : plan_.input_order) {
    if (name == input) break;
    earlier.insert(name);
  }
  std::set<std::string> upstream;
  for (const auto& [module, module_input] : done_) {
    if (earlier.count(module_input) > 0) upstream.insert(module);
  }
  return upstream;
}

absl::StatusOr<at::Tensor> LayerGptq::Capture(const GptqTarget& target) {
  std::shared_ptr<runtime::LinearLike> original = layer_.FindLinear(target.relative_name);
  if (original == nullptr) {
    return absl::InvalidArgumentError(StrCat(layer_.prefix(), target.relative_name, ": no such linear"));
  }
  HessianAccumulator hessian(original->in_features());
  auto capturing = std::make_shared<CapturingLinear>(original, &hessian, /*routed=*/false);
  QUARK_RETURN_IF_ERROR(layer_.ReplaceLinear(target.relative_name, capturing));
  absl::Status status;
  for (const at::Tensor& sample : samples_) {
    try {
      forward_(sample);
      status = absl::InternalError(StrCat(layer_.prefix(), target.relative_name, ": the forward never reached it"));
    } catch (const StopForward&) {
      status = capturing->status();
    } catch (const std::exception& error) {
      status = runtime::TorchErrorToStatus(error, StrCat("forward of ", layer_.prefix(), " for ", target.relative_name));
    }
    if (!status.ok()) break;
  }
  QUARK_RETURN_IF_ERROR(layer_.ReplaceLinear(target.relative_name, original));
  QUARK_RETURN_IF_ERROR(status);
  return std::move(hessian).Finish();
}

absl::Status LayerGptq::CaptureRouted(const std::vector<GptqTarget>& step) {
  std::vector<const GptqTarget*> pending;
  std::set<std::string> inputs;
  for (const GptqTarget& target : step) {
    if (!target.routed || inputs.count(target.input) > 0) continue;
    auto it = cache_.find(target.input);
    if (it != cache_.end() && it->second.upstream == UpstreamOf(target.input)) continue;
    pending.push_back(&target);
    inputs.insert(target.input);
  }
  if (pending.empty()) return absl::OkStatus();
  std::vector<std::unique_ptr<HessianAccumulator>> hessians;
  std::vector<std::shared_ptr<CapturingLinear>> capturing;
  std::vector<std::shared_ptr<runtime::LinearLike>> originals;
  absl::Status status;
  for (const GptqTarget* target : pending) {
    std::shared_ptr<runtime::LinearLike> original = layer_.FindLinear(target->relative_name);
    if (original == nullptr) {
      status = absl::InvalidArgumentError(StrCat(layer_.prefix(), target->relative_name, ": no such linear"));
      break;
    }
    hessians.push_back(std::make_unique<HessianAccumulator>(original->in_features()));
    capturing.push_back(std::make_shared<CapturingLinear>(original, hessians.back().get(), /*routed=*/true));
    status = layer_.ReplaceLinear(target->relative_name, capturing.back());
    if (!status.ok()) break;
    originals.push_back(std::move(original));
  }
  if (status.ok()) {
    // Every sample goes through whole (a routed linear may see no token of one sample), then the experts short of
    // tokens run on their best-ranked other tokens: the Hessians get those too.
    layer_.BeginCalibration(plan_.min_expert_tokens);
    try {
      for (const at::Tensor& sample : samples_) forward_(sample);
      std::vector<runtime::ExpertCoverage> coverage = layer_.FinishCalibration();
      if (callbacks_.on_coverage) callbacks_.on_coverage(coverage);
    } catch (const std::exception& error) {
      status = runtime::TorchErrorToStatus(error, StrCat("forward of ", layer_.prefix(), " for its experts"));
    }
  }
  for (size_t i = 0; i < originals.size(); ++i) {
    const absl::Status restored = layer_.ReplaceLinear(pending[i]->relative_name, originals[i]);
    if (status.ok()) status = restored;
  }
  for (size_t i = 0; status.ok() && i < capturing.size(); ++i) status = capturing[i]->status();
  QUARK_RETURN_IF_ERROR(status);
  for (size_t i = 0; i < pending.size(); ++i) {
    const std::string& name = pending[i]->relative_name;
    if (hessians[i]->sequences() == 0) {
      return runtime::NoExpertTokensError(layer_.prefix() + name.substr(0, name.rfind('.')),
                                          StrCat("GPTQ's Hessian of ", layer_.prefix(), name), plan_.min_expert_tokens);
    }
    QUARK_ASSIGN_OR_RETURN(at::Tensor h, std::move(*hessians[i]).Finish());
    cache_[pending[i]->input] = CachedHessian{std::move(h), nullptr, UpstreamOf(pending[i]->input)};
  }
  return absl::OkStatus();
}

absl::Status LayerGptq::EnsureHessian(const GptqTarget& target) {
  std::set<std::string> upstream = UpstreamOf(target.input);
  if (auto it = cache_.find(target.input); it != cache_.end() && it->second.upstream == upstream) {
    return absl::OkStatus();
  }
  if (target.routed) {
    // An expert's linear: captured with the rest of its step's experts in one pass over the samples.
    return CaptureRouted({target});
  }
  QUARK_ASSIGN_OR_RETURN(at::Tensor hessian, Capture(target));
  cache_[target.input] = CachedHessian{std::move(hessian), nullptr, std::move(upstream)};
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const GptqFactor>> LayerGptq::FactorOf(const GptqTarget& target,
                                                                      const GptqOptions& options) {
  CachedHessian& cached = cache_.at(target.input);
  if (cached.factor == nullptr) {
    cached.diagonal = cached.hessian.diagonal().clone();  // K values, for targets with their own quantizer
    // Handed over alone, so the factorisation works on the Hessian in place (K x K: 0.5 GB for down_proj's input).
    QUARK_ASSIGN_OR_RETURN(GptqFactor factor, GptqFactorOf(std::move(cached.hessian), options));
    cached.factor = std::make_shared<const GptqFactor>(std::move(factor));
  }
  return cached.factor;
}

absl::Status LayerGptq::SetWeight(const GptqTarget& target, at::Tensor weight) {
  auto linear = std::dynamic_pointer_cast<runtime::FloatLinear>(layer_.FindLinear(target.relative_name));
  if (linear == nullptr) {
    return absl::FailedPreconditionError(
        StrCat(layer_.prefix(), target.relative_name, ": GPTQ edits float linears only"));
  }
  linear->set_weight(std::move(weight));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::map<std::string, QuantParams>> GptqQuantizeLayer(runtime::DecoderLayer& layer,
                                                                     const std::vector<at::Tensor>& samples,
                                                                     const LayerForward& forward,
                                                                     const GptqLayerPlan& plan,
                                                                     const GptqOptions& options,
                                                                     const GptqLayerCallbacks& callbacks) {
  if (samples.empty()) return absl::FailedPreconditionError(StrCat(layer.prefix(), ": GPTQ needs calibration samples"));
  int total = 0;
  for (const auto& step : plan.steps) total += static_cast<int>(step.size());
  LayerGptq run(layer, samples, forward, plan, callbacks);
  std::map<std::string, QuantParams> params;
  int index = 0;
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    const auto& step = plan.steps[s];
    // Quark collects the statistics of an entry's modules before it quantizes any of them.
    QUARK_RETURN_IF_ERROR(run.CaptureRouted(step));
    for (const GptqTarget& target : step) QUARK_RETURN_IF_ERROR(run.EnsureHessian(target));
    std::vector<std::shared_ptr<const GptqFactor>> factors;
    std::vector<at::Tensor> diagonals;
    for (const GptqTarget& target : step) {
      auto factor = run.FactorOf(target, options);
      if (!factor.ok()) {
        return absl::Status(factor.status().code(), StrCat(layer.prefix(), target.relative_name, ": ",
                                                           std::string(factor.status().message())));
      }
      factors.push_back(*std::move(factor));
      diagonals.push_back(run.DiagonalOf(target));
    }
    run.ForgetUnused(s + 1);
    for (size_t i = 0; i < step.size(); ++i) {
      const GptqTarget& target = step[i];
      const std::string name = layer.prefix() + target.relative_name;
      if (callbacks.cancelled && callbacks.cancelled()) {
        return absl::CancelledError(StrCat("cancelled before gptq of ", name));
      }
      if (callbacks.on_module) callbacks.on_module(name, index, total);
      ++index;
      const at::Tensor weight = layer.FindLinear(target.relative_name)->weight();
      if (target.quantize) {
        auto quantized = target.quantize(weight, *factors[i], diagonals[i]);
        factors[i] = nullptr;
        if (!quantized.ok()) {
          return absl::Status(quantized.status().code(), StrCat(name, ": ", std::string(quantized.status().message())));
        }
        QUARK_RETURN_IF_ERROR(run.SetWeight(target, *std::move(quantized)));
        run.MarkDone(target.relative_name, target.input);
        continue;
      }
      GptqOptions module_options = options;
      module_options.nvfp4_global_amax = target.nvfp4_global_amax;
      auto result = GptqQuantizeWeight(weight, *factors[i], target.spec, module_options);
      factors[i] = nullptr;  // the last module of an input releases its factor
      if (!result.ok()) {
        return absl::Status(result.status().code(), StrCat(name, ": ", std::string(result.status().message())));
      }
      QUARK_RETURN_IF_ERROR(run.SetWeight(target, std::move(result->weight)));
      run.MarkDone(target.relative_name, target.input);
      params[name] = std::move(result->params);
    }
  }
  return params;
}

}  // namespace quark::algorithms
