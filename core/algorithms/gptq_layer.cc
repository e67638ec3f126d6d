#include "core/algorithms/gptq_layer.h"

#include <algorithm>
#include <cctype>
#include <memory>
#include <optional>
#include <set>

#include "core/algorithms/hessian.h"
#include "core/algorithms/stop_forward.h"
#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/runtime/expert_streaming.h"
#include "core/runtime/layer_streamer.h"
#include "core/runtime/linear.h"
#include "core/runtime/moe_block.h"
#include "core/runtime/moe_split_layer.h"

namespace quark::algorithms {
namespace {

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
  /// `params`: the weight's quantization (null for a target with its own quantizer), for a streamed expert's spill.
  absl::Status SetWeight(const GptqTarget& target, at::Tensor weight, const QuantParams* params);
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
  const std::set<std::string> needed = InputsReadFrom(plan_, next_step);
  for (auto it = cache_.begin(); it != cache_.end();) it = needed.count(it->first) ? std::next(it) : cache_.erase(it);
}

std::set<std::string> LayerGptq::UpstreamOf(const std::string& input) const {
  return QuantizedUpstreamOf(plan_, done_, input);
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

absl::Status LayerGptq::SetWeight(const GptqTarget& target, at::Tensor weight, const QuantParams* params) {
  const std::shared_ptr<runtime::LinearLike> current = layer_.FindLinear(target.relative_name);
  if (auto streamed = std::dynamic_pointer_cast<runtime::StreamedLinear>(current)) {
    // An expert streamed in groups loads again from its source: the weight goes where that source reads it.
    const std::string tensor = StrCat(layer_.prefix(), target.relative_name, ".weight");
    if (!callbacks_.keep_streamed_weight) {
      return absl::FailedPreconditionError(StrCat(tensor, ": GPTQ of an expert streamed in groups has nowhere to keep "
                                                  "its weight while the expert is not resident"));
    }
    QUARK_RETURN_IF_ERROR(
        callbacks_.keep_streamed_weight(tensor, weight, target.quantize ? nullptr : &target.spec, params));
    return streamed->ReplaceWeight(weight);
  }
  auto linear = std::dynamic_pointer_cast<runtime::FloatLinear>(current);
  if (linear == nullptr) {
    return absl::FailedPreconditionError(
        StrCat(layer_.prefix(), target.relative_name, ": GPTQ edits float linears only"));
  }
  linear->set_weight(std::move(weight));
  return absl::OkStatus();
}

// Counts the layer's modules for on_module and collects the weight parameters.
struct GptqProgress {
  int index = 0;
  int total = 0;
  std::map<std::string, QuantParams> params;
};

// One inside_layer_modules entry of `plan` (steps[s]): Quark collects the statistics of an entry's modules before it
// quantizes any of them.
absl::Status QuantizeStep(LayerGptq& run, runtime::DecoderLayer& layer, const GptqLayerPlan& plan, size_t s,
                          const GptqOptions& options, const GptqLayerCallbacks& callbacks, GptqProgress& progress) {
  const auto& step = plan.steps[s];
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
    if (callbacks.on_module) callbacks.on_module(name, progress.index, progress.total);
    ++progress.index;
    const at::Tensor weight = layer.FindLinear(target.relative_name)->weight();
    if (target.quantize) {
      auto quantized = target.quantize(weight, *factors[i], diagonals[i]);
      factors[i] = nullptr;
      if (!quantized.ok()) {
        return absl::Status(quantized.status().code(), StrCat(name, ": ", std::string(quantized.status().message())));
      }
      QUARK_RETURN_IF_ERROR(run.SetWeight(target, *std::move(quantized), nullptr));
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
    QUARK_RETURN_IF_ERROR(run.SetWeight(target, std::move(result->weight), &result->params));
    run.MarkDone(target.relative_name, target.input);
    progress.params[name] = std::move(result->params);
  }
  return absl::OkStatus();
}

// "mlp.experts.12.up_proj" -> 12: every family's layout names a routed expert's linears "...experts.<E>.<proj>".
std::optional<int64_t> ExpertIndexOf(const std::string& relative_name) {
  constexpr std::string_view kKey = "experts.";
  const size_t at = relative_name.rfind(kKey);
  if (at == std::string::npos) return std::nullopt;
  const size_t begin = at + kKey.size();
  size_t end = begin;
  while (end < relative_name.size() && std::isdigit(static_cast<unsigned char>(relative_name[end]))) ++end;
  if (end == begin || end - begin > 9 || end >= relative_name.size() || relative_name[end] != '.') return std::nullopt;
  return std::stoll(relative_name.substr(begin, end - begin));
}

bool IsStreamed(const runtime::DecoderLayer& layer, const GptqTarget& target) {
  return std::dynamic_pointer_cast<runtime::StreamedLinear>(layer.FindLinear(target.relative_name)) != nullptr;
}

// The first step with a routed target whose expert streams in groups (runtime::StreamedLinear), or nullopt when the
// layer's experts are all in memory (then Quark's order, entry by entry). With streamed experts, the non-routed
// targets from that step on must read inputs that the experts' outputs do not reach (earlier in the layer's input
// order than every routed input): their Hessians are then the same whether the experts are quantized first or not.
absl::StatusOr<std::optional<size_t>> FirstStreamedExpertStep(const runtime::DecoderLayer& layer,
                                                              const GptqLayerPlan& plan) {
  std::optional<size_t> first;
  for (size_t s = 0; s < plan.steps.size() && !first; ++s) {
    for (const GptqTarget& target : plan.steps[s]) {
      if (target.routed && IsStreamed(layer, target)) {
        first = s;
        break;
      }
    }
  }
  if (!first) return first;
  const auto position = [&](const std::string& input) {
    return std::find(plan.input_order.begin(), plan.input_order.end(), input) - plan.input_order.begin();
  };
  std::ptrdiff_t first_routed_input = static_cast<std::ptrdiff_t>(plan.input_order.size());
  for (size_t s = *first; s < plan.steps.size(); ++s) {
    for (const GptqTarget& target : plan.steps[s]) {
      if (!target.routed) continue;
      if (!ExpertIndexOf(target.relative_name)) {
        return absl::InternalError(StrCat(layer.prefix(), target.relative_name, ": a routed linear outside experts.<E>"));
      }
      first_routed_input = std::min(first_routed_input, position(target.input));
    }
  }
  for (size_t s = *first; s < plan.steps.size(); ++s) {
    for (const GptqTarget& target : plan.steps[s]) {
      if (target.routed || position(target.input) < first_routed_input) continue;
      return absl::FailedPreconditionError(StrCat(
          layer.prefix(), target.relative_name, ": inside_layer_modules puts it after the routed experts and it reads "
          "what they compute, but GPTQ of experts streamed in groups quantizes every expert's linears together, "
          "expert by expert: set expert_group_size to 0 (the whole layer in memory) to keep this order"));
    }
  }
  return first;
}

// Stands in for an expert of the routed block during a recording pass: keeps the tokens it is called with when its
// expert is in the group, and returns zeros without running (or loading) anything. An expert's input depends on the
// routing only, never on another expert's output, so what the group records is what the real forward feeds it.
class RecordingExpert : public runtime::MoeExpert {
 public:
  RecordingExpert(bool record, const runtime::ActivationHome& activations) : record_(record), activations_(activations) {}
  at::Tensor forward(const at::Tensor& x) override {
    if (record_) calls.push_back(activations_.Keep(x));
    return at::zeros_like(x);
  }
  std::vector<at::Tensor> calls;

 private:
  bool record_;
  const runtime::ActivationHome& activations_;
};

// Every expert of `block` replaced by a RecordingExpert while it lives (those of `group` recording).
class RecordedExperts {
 public:
  RecordedExperts(runtime::MoeBlock& block, const std::vector<int64_t>& group, const runtime::ActivationHome& activations)
      : block_(block), originals_(block.experts) {
    for (size_t e = 0; e < block.experts.size(); ++e) {
      const bool record = std::find(group.begin(), group.end(), static_cast<int64_t>(e)) != group.end();
      recorders_.push_back(std::make_shared<RecordingExpert>(record, activations));
      block.experts[e] = recorders_.back();
    }
  }
  ~RecordedExperts() { block_.experts = originals_; }
  RecordedExperts(const RecordedExperts&) = delete;
  RecordedExperts& operator=(const RecordedExperts&) = delete;
  std::vector<at::Tensor> Take(int64_t expert) { return std::move(recorders_[expert]->calls); }

 private:
  runtime::MoeBlock& block_;
  std::vector<std::shared_ptr<runtime::MoeExpert>> originals_;
  std::vector<std::shared_ptr<RecordingExpert>> recorders_;
};

// The routed block's input for each sample (its forward up to the block: the post-attention norm of the attended
// hidden states), from one forward of the layer stopped there.
absl::StatusOr<std::vector<at::Tensor>> RoutedBlockInputs(runtime::DecoderLayer& layer, runtime::MoeBlock& block,
                                                          const std::vector<at::Tensor>& samples,
                                                          const LayerForward& forward,
                                                          const runtime::ActivationHome& activations) {
  std::vector<at::Tensor> inputs;
  block.set_input_observer([&inputs, &activations](const at::Tensor& flat) {
    inputs.push_back(activations.Keep(flat));
    throw StopForward{};
  });
  absl::Status status;
  for (const at::Tensor& sample : samples) {
    try {
      forward(sample);
      status = absl::InternalError(StrCat(layer.prefix(), ": the forward never reached the routed block"));
    } catch (const StopForward&) {
    } catch (const std::exception& error) {
      status = runtime::TorchErrorToStatus(error, StrCat("forward of ", layer.prefix(), " up to its experts"));
    }
    if (!status.ok()) break;
  }
  block.set_input_observer(nullptr);
  QUARK_RETURN_IF_ERROR(status);
  return inputs;
}

// The calls each expert of `group` gets over the samples' forwards and the coverage top-up, in call order: the
// chunks its linears' Hessians add, one by one, in a whole-layer capture. The routed block alone runs (on its
// recorded inputs: the router and the shared expert); no expert is loaded.
absl::StatusOr<std::vector<std::vector<at::Tensor>>> RecordExpertInputs(
    runtime::DecoderLayer& layer, runtime::MoeBlock& block, const std::vector<at::Tensor>& block_inputs,
    const std::vector<int64_t>& group, int64_t min_expert_tokens,
    const std::function<void(const std::vector<runtime::ExpertCoverage>&)>& on_coverage,
    const runtime::ActivationHome& activations) {
  RecordedExperts recorded(block, group, activations);
  layer.BeginCalibration(min_expert_tokens);
  try {
    for (const at::Tensor& input : block_inputs) block.forward(activations.Place(input));
    const std::vector<runtime::ExpertCoverage> coverage = layer.FinishCalibration();
    if (on_coverage) on_coverage(coverage);
  } catch (const std::exception& error) {
    return runtime::TorchErrorToStatus(error, StrCat("forward of ", layer.prefix(), "'s routed block for its experts"));
  }
  std::vector<std::vector<at::Tensor>> calls;
  for (const int64_t e : group) calls.push_back(recorded.Take(e));
  return calls;
}

// The routed targets of plan.steps[first...], expert by expert, G experts (the residency's group size) at a time:
// the routed block's inputs from one forward, one recording pass of the block alone per group, then each expert's
// entries in their order, its Hessians captured by running the expert alone on its recorded calls. The same Hessians, so the same weights, as the whole-layer
// capture: each linear adds the same inputs in the same order; only the order across experts changes, and no expert
// reads another's output. Memory: the block's inputs (one hidden state per token), one group's calls and one
// expert's Hessians, not every expert's.
absl::Status ExpertsInGroups(runtime::DecoderLayer& layer, const std::vector<at::Tensor>& samples,
                             const LayerForward& forward, const GptqLayerPlan& plan, size_t first,
                             const GptqOptions& options, const GptqLayerCallbacks& callbacks, GptqProgress& progress,
                             const runtime::ActivationHome& activations) {
  auto* split = dynamic_cast<runtime::MoeSplitLayer*>(&layer);
  runtime::MoeBlock* block = split != nullptr ? split->routed_block() : nullptr;
  if (block == nullptr) return absl::InternalError(StrCat(layer.prefix(), ": streamed experts but no routed block"));
  std::map<int64_t, GptqLayerPlan> by_expert;  // each expert's share of the routed entries, as a plan of its own
  int64_t group_size = 1;
  for (size_t s = first; s < plan.steps.size(); ++s) {
    std::map<int64_t, std::vector<GptqTarget>> step;
    for (const GptqTarget& target : plan.steps[s]) {
      if (!target.routed) continue;
      const int64_t e = *ExpertIndexOf(target.relative_name);  // FirstStreamedExpertStep checked
      if (e >= block->num_experts()) {
        return absl::InternalError(StrCat(layer.prefix(), target.relative_name, ": expert ", e, " of ",
                                          block->num_experts()));
      }
      GptqTarget own = target;
      own.routed = false;  // the expert's own calls: captured like any linear's, stopping after it
      step[e].push_back(std::move(own));
      auto streamed = std::dynamic_pointer_cast<runtime::StreamedLinear>(layer.FindLinear(target.relative_name));
      if (streamed) group_size = std::max(group_size, streamed->residency()->group_size());
    }
    for (auto& [e, targets] : step) by_expert[e].steps.push_back(std::move(targets));
  }
  std::vector<int64_t> experts;
  for (auto& [e, own] : by_expert) {
    own.input_order = plan.input_order;
    experts.push_back(e);
  }
  // Later groups route the same block inputs: the layer's attention runs once, not once a group.
  QUARK_ASSIGN_OR_RETURN(const std::vector<at::Tensor> block_inputs,
                         RoutedBlockInputs(layer, *block, samples, forward, activations));
  for (size_t g = 0; g < experts.size(); g += static_cast<size_t>(group_size)) {
    const std::vector<int64_t> group(experts.begin() + static_cast<std::ptrdiff_t>(g),
                                     experts.begin() + static_cast<std::ptrdiff_t>(
                                                           std::min(experts.size(), g + static_cast<size_t>(group_size))));
    // Every group's pass routes the same tokens: the coverage is reported once.
    QUARK_ASSIGN_OR_RETURN(std::vector<std::vector<at::Tensor>> calls,
                           RecordExpertInputs(layer, *block, block_inputs, group, plan.min_expert_tokens,
                                              g == 0 ? callbacks.on_coverage : nullptr, activations));
    for (size_t i = 0; i < group.size(); ++i) {
      const GptqLayerPlan& own = by_expert.at(group[i]);
      if (calls[i].empty()) {
        const std::string& name = own.steps.front().front().relative_name;
        return runtime::NoExpertTokensError(layer.prefix() + name.substr(0, name.rfind('.')),
                                            StrCat("GPTQ's Hessian of ", layer.prefix(), name), plan.min_expert_tokens);
      }
      const std::shared_ptr<runtime::MoeExpert> expert = block->experts[group[i]];
      const LayerForward expert_forward = [&expert, &activations](const at::Tensor& x) {
        expert->forward(activations.Place(x));
      };
      LayerGptq run(layer, calls[i], expert_forward, own, callbacks);
      for (size_t s = 0; s < own.steps.size(); ++s) {
        QUARK_RETURN_IF_ERROR(QuantizeStep(run, layer, own, s, options, callbacks, progress));
      }
      calls[i].clear();
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::set<std::string> QuantizedUpstreamOf(const GptqLayerPlan& plan, const std::map<std::string, std::string>& done,
                                          const std::string& input) {
  std::set<std::string> earlier;
  for (const std::string& name : plan.input_order) {
    if (name == input) break;
    earlier.insert(name);
  }
  std::set<std::string> upstream;
  for (const auto& [module, module_input] : done) {
    if (earlier.count(module_input) > 0) upstream.insert(module);
  }
  return upstream;
}

std::set<std::string> InputsReadFrom(const GptqLayerPlan& plan, size_t step) {
  std::set<std::string> inputs;
  for (size_t s = step; s < plan.steps.size(); ++s) {
    for (const GptqTarget& target : plan.steps[s]) inputs.insert(target.input);
  }
  return inputs;
}

absl::StatusOr<std::map<std::string, QuantParams>> GptqQuantizeLayer(runtime::DecoderLayer& layer,
                                                                     const std::vector<at::Tensor>& samples,
                                                                     const LayerForward& forward,
                                                                     const GptqLayerPlan& plan,
                                                                     const GptqOptions& options,
                                                                     const GptqLayerCallbacks& callbacks,
                                                                     const runtime::ActivationHome& activations) {
  if (samples.empty()) return absl::FailedPreconditionError(StrCat(layer.prefix(), ": GPTQ needs calibration samples"));
  GptqProgress progress;
  for (const auto& step : plan.steps) progress.total += static_cast<int>(step.size());
  QUARK_ASSIGN_OR_RETURN(const std::optional<size_t> grouped, FirstStreamedExpertStep(layer, plan));
  if (!grouped) {
    LayerGptq run(layer, samples, forward, plan, callbacks);
    for (size_t s = 0; s < plan.steps.size(); ++s) {
      QUARK_RETURN_IF_ERROR(QuantizeStep(run, layer, plan, s, options, callbacks, progress));
    }
    return std::move(progress.params);
  }
  // Experts streamed in groups: the entries before the first routed one as above, then every routed entry expert by
  // expert (ExpertsInGroups), then the rest's modules that are not routed experts' (none of them reads what the experts
  // compute, FirstStreamedExpertStep checked).
  GptqLayerPlan rest = plan;
  for (size_t s = *grouped; s < rest.steps.size(); ++s) {
    auto& step = rest.steps[s];
    step.erase(std::remove_if(step.begin(), step.end(), [](const GptqTarget& t) { return t.routed; }), step.end());
  }
  LayerGptq rest_run(layer, samples, forward, rest, callbacks);
  for (size_t s = 0; s < rest.steps.size(); ++s) {
    if (s == *grouped) {
      QUARK_RETURN_IF_ERROR(
          ExpertsInGroups(layer, samples, forward, plan, *grouped, options, callbacks, progress, activations));
    }
    QUARK_RETURN_IF_ERROR(QuantizeStep(rest_run, layer, rest, s, options, callbacks, progress));
  }
  return std::move(progress.params);
}

}  // namespace quark::algorithms
