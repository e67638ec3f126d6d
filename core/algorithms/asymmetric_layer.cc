#include "core/algorithms/asymmetric_layer.h"

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "core/algorithms/stop_forward.h"
#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/runtime/layer_streamer.h"
#include "core/runtime/linear.h"

namespace quark::algorithms {
namespace {

// Stands in for a linear during a capture pass: keeps its input, then stops the forward.
class InputRecorder : public runtime::LinearLike {
 public:
  explicit InputRecorder(std::shared_ptr<runtime::LinearLike> inner) : inner_(std::move(inner)) {}
  at::Tensor forward(const at::Tensor& input) override {
    input_ = input;
    throw StopForward{};
  }
  int64_t in_features() const override { return inner_->in_features(); }
  int64_t out_features() const override { return inner_->out_features(); }
  at::Tensor weight() const override { return inner_->weight(); }
  at::Tensor bias() const override { return inner_->bias(); }
  const at::Tensor& input() const { return input_; }

 private:
  std::shared_ptr<runtime::LinearLike> inner_;
  at::Tensor input_;
};

class LayerRun {
 public:
  LayerRun(runtime::DecoderLayer& layer, const LayerForwardOutput& forward) : layer_(layer), forward_(forward) {}

  /// The input `relative_name` reads when the layer runs on `sample`.
  absl::StatusOr<at::Tensor> Capture(const std::string& relative_name, const at::Tensor& sample);
  absl::StatusOr<std::shared_ptr<runtime::FloatLinear>> Float(const std::string& relative_name) const;
  /// Records the module's weight before it is first replaced, then sets `weight`.
  absl::Status SetQuantized(const std::string& relative_name, at::Tensor weight);
  /// The quantized modules with their original (true) or quantized (false) weights.
  absl::Status UseOriginal(bool original);

 private:
  runtime::DecoderLayer& layer_;
  const LayerForwardOutput& forward_;
  std::map<std::string, std::pair<at::Tensor, at::Tensor>> weights_;  // module -> (original, quantized)
};

absl::StatusOr<std::shared_ptr<runtime::FloatLinear>> LayerRun::Float(const std::string& relative_name) const {
  auto linear = std::dynamic_pointer_cast<runtime::FloatLinear>(layer_.FindLinear(relative_name));
  if (linear == nullptr) {
    return absl::FailedPreconditionError(StrCat(layer_.prefix(), relative_name, ": not a float linear of the layer"));
  }
  return linear;
}

absl::StatusOr<at::Tensor> LayerRun::Capture(const std::string& relative_name, const at::Tensor& sample) {
  std::shared_ptr<runtime::LinearLike> original = layer_.FindLinear(relative_name);
  if (original == nullptr) return absl::InvalidArgumentError(StrCat(layer_.prefix(), relative_name, ": no such linear"));
  auto recorder = std::make_shared<InputRecorder>(original);
  QUARK_RETURN_IF_ERROR(layer_.ReplaceLinear(relative_name, recorder));
  absl::Status status = absl::InternalError(StrCat(layer_.prefix(), relative_name, ": the forward never reached it"));
  try {
    forward_(sample);
  } catch (const StopForward&) {
    status = absl::OkStatus();
  } catch (const std::exception& error) {
    status = runtime::TorchErrorToStatus(error, StrCat("forward of ", layer_.prefix(), " for ", relative_name));
  }
  QUARK_RETURN_IF_ERROR(layer_.ReplaceLinear(relative_name, original));
  QUARK_RETURN_IF_ERROR(status);
  return recorder->input();
}

absl::Status LayerRun::SetQuantized(const std::string& relative_name, at::Tensor weight) {
  QUARK_ASSIGN_OR_RETURN(auto linear, Float(relative_name));
  weights_[relative_name] = {linear->weight(), weight};
  linear->set_weight(std::move(weight));
  return absl::OkStatus();
}

absl::Status LayerRun::UseOriginal(bool original) {
  for (const auto& [name, pair] : weights_) {
    QUARK_ASSIGN_OR_RETURN(auto linear, Float(name));
    linear->set_weight(original ? pair.first : pair.second);
  }
  return absl::OkStatus();
}

// What the layer holds of an input: its paired statistics, or for GPTAQ the factor made from them on the input's first
// reader (GptaqFactorOf takes the statistics over), with the quantized modules upstream of the input when they were
// collected. They stay valid while that set is the same (QuantizedUpstreamOf, the rule GPTQ's cached Hessians follow):
// a module never changes its own input, so after k_proj the statistics of v_proj's and q_proj's input are what a new
// collection would give, bit for bit (Quark collects them again).
struct CachedInput {
  std::optional<AsymmetricStats> stats;
  std::optional<GptaqFactor> factor;
  std::set<std::string> upstream;
};
using InputCache = std::map<std::string, CachedInput>;

// The paired statistics of each distinct input of a step that `cache` has no valid entry for, sample by sample.
absl::Status CollectStep(LayerRun& run, const std::vector<GptqTarget>& step, const std::vector<at::Tensor>& quantized,
                         const std::vector<at::Tensor>& original, HessianMethod method, const GptqLayerPlan& plan,
                         const std::map<std::string, std::string>& done, const std::string& prefix,
                         InputCache& cache) {
  for (const GptqTarget& target : step) {
    if (target.routed) {
      return absl::UnimplementedError(
          StrCat(prefix, target.relative_name, ": gptaq and qronos on MoE experts are not implemented"));
    }
    std::set<std::string> upstream = QuantizedUpstreamOf(plan, done, target.input);
    if (auto it = cache.find(target.input); it != cache.end() && it->second.upstream == upstream) continue;
    QUARK_ASSIGN_OR_RETURN(auto linear, run.Float(target.relative_name));
    AsymmetricStats s(method, linear->in_features());
    for (size_t b = 0; b < quantized.size(); ++b) {
      QUARK_ASSIGN_OR_RETURN(const at::Tensor xq, run.Capture(target.relative_name, quantized[b]));
      QUARK_RETURN_IF_ERROR(run.UseOriginal(true));
      auto x = run.Capture(target.relative_name, original[b]);
      QUARK_RETURN_IF_ERROR(run.UseOriginal(false));
      if (!x.ok()) return x.status();
      QUARK_RETURN_IF_ERROR(s.Add(xq, *x));
    }
    cache[target.input] = CachedInput{std::move(s), std::nullopt, std::move(upstream)};
  }
  return absl::OkStatus();
}

// One module's weight. GPTAQ: on its input's factor, made from the statistics (handed over) on the input's first
// reader and shared by the others. Qronos: on the statistics, handed over to `hand_over` and copied for the others.
absl::StatusOr<GptqResult> QuantizeTarget(const at::Tensor& weight, const GptqTarget& target, bool hand_over,
                                          CachedInput& input, const AsymmetricOptions& options) {
  if (options.method == HessianMethod::kGptaq) {
    if (!input.factor) {
      auto [hessian, cross] = input.stats->Release();
      input.stats.reset();
      QUARK_ASSIGN_OR_RETURN(input.factor,
                             GptaqFactorOf(std::move(hessian), std::move(cross), options, weight.device()));
    }
    return GptaqQuantizeWeight(weight, *input.factor, target.spec, options);
  }
  AsymmetricStats& stats = *input.stats;
  auto [hessian, cross] = hand_over ? stats.Release() : std::make_pair(stats.hessian(), stats.cross());
  return AsymmetricQuantizeWeight(weight, std::move(hessian), std::move(cross), target.spec, options);
}

}  // namespace

absl::StatusOr<std::map<std::string, QuantParams>> AsymmetricQuantizeLayer(
    runtime::DecoderLayer& layer, const std::vector<at::Tensor>& quantized_samples,
    std::vector<at::Tensor>& float_samples, const LayerForwardOutput& forward, const GptqLayerPlan& plan,
    const AsymmetricOptions& options, const GptqLayerCallbacks& callbacks) {
  const char* name = options.method == HessianMethod::kQronos ? "qronos" : "gptaq";
  if (quantized_samples.empty() || quantized_samples.size() != float_samples.size()) {
    return absl::FailedPreconditionError(
        StrCat(layer.prefix(), ": ", name, " needs calibration samples, as many float as quantized"));
  }
  int total = 0;
  for (const auto& step : plan.steps) total += static_cast<int>(step.size());
  LayerRun run(layer, forward);
  std::map<std::string, QuantParams> params;
  int index = 0;
  std::map<std::string, std::string> done;  // quantized module -> its input
  InputCache cache;
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    const std::vector<GptqTarget>& step = plan.steps[s];
    QUARK_RETURN_IF_ERROR(CollectStep(run, step, quantized_samples, float_samples, options.method, plan, done,
                                      layer.prefix(), cache));
    const std::set<std::string> later = InputsReadFrom(plan, s + 1);
    // Qronos: the last module reading an input takes its statistics over (quantized in their memory) unless a later
    // step may read them; the others get copies.
    std::map<std::string, const GptqTarget*> last_reader;
    for (const GptqTarget& target : step) {
      if (later.count(target.input) == 0) last_reader[target.input] = &target;
    }
    for (const GptqTarget& target : step) {
      const std::string module = layer.prefix() + target.relative_name;
      if (callbacks.cancelled && callbacks.cancelled()) {
        return absl::CancelledError(StrCat("cancelled before ", name, " of ", module));
      }
      if (callbacks.on_module) callbacks.on_module(module, index, total);
      ++index;
      QUARK_ASSIGN_OR_RETURN(auto linear, run.Float(target.relative_name));
      AsymmetricOptions module_options = options;
      module_options.gptq.nvfp4_global_amax = target.nvfp4_global_amax;
      const auto last = last_reader.find(target.input);
      const bool hand_over = last != last_reader.end() && last->second == &target;
      auto result = QuantizeTarget(linear->weight(), target, hand_over, cache.at(target.input), module_options);
      if (!result.ok()) {
        return absl::Status(result.status().code(), StrCat(module, ": ", std::string(result.status().message())));
      }
      QUARK_RETURN_IF_ERROR(run.SetQuantized(target.relative_name, std::move(result->weight)));
      params[module] = std::move(result->params);
      done[target.relative_name] = target.input;
    }
    for (auto it = cache.begin(); it != cache.end();) it = later.count(it->first) ? std::next(it) : cache.erase(it);
  }
  // The float stream moves on through the layer as the float model has it.
  QUARK_RETURN_IF_ERROR(run.UseOriginal(true));
  absl::Status status;
  try {
    for (at::Tensor& sample : float_samples) sample = forward(sample);
  } catch (const std::exception& error) {
    status = runtime::TorchErrorToStatus(error, StrCat("float forward of ", layer.prefix()));
  }
  QUARK_RETURN_IF_ERROR(run.UseOriginal(false));
  QUARK_RETURN_IF_ERROR(status);
  return params;
}

}  // namespace quark::algorithms
