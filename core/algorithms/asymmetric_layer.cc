#include "core/algorithms/asymmetric_layer.h"

#include <map>
#include <memory>
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

// What a step has of its inputs: their statistics, and for GPTAQ the factor derived from an input's statistics on its
// first reader (which then replaces them: GptaqFactorOf takes them over).
struct InputsAtHand {
  std::map<std::string, AsymmetricStats> stats;
  std::map<std::string, GptaqFactor> factors;
};

// The paired statistics of each distinct input of a step, sample by sample, added to what `at_hand` has (still valid:
// see CarriedInput) of the step's inputs.
absl::Status CollectStep(LayerRun& run, const std::vector<GptqTarget>& step, const std::vector<at::Tensor>& quantized,
                         const std::vector<at::Tensor>& original, HessianMethod method, const std::string& prefix,
                         InputsAtHand& at_hand) {
  std::map<std::string, AsymmetricStats>& stats = at_hand.stats;
  for (const GptqTarget& target : step) {
    if (target.routed) {
      return absl::UnimplementedError(
          StrCat(prefix, target.relative_name, ": gptaq and qronos on MoE experts are not implemented"));
    }
    if (stats.count(target.input) > 0 || at_hand.factors.count(target.input) > 0) continue;
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
    stats.emplace(target.input, std::move(s));
  }
  return absl::OkStatus();
}

// One module's weight. GPTAQ: on its input's factor, derived from the statistics (handed over) on the input's first
// reader and shared by the others. Qronos: on the statistics, handed over to `hand_over` and copied for the others.
absl::StatusOr<GptqResult> QuantizeTarget(const at::Tensor& weight, const GptqTarget& target, bool hand_over,
                                          InputsAtHand& at_hand, const AsymmetricOptions& options) {
  if (options.method == HessianMethod::kGptaq) {
    auto factor = at_hand.factors.find(target.input);
    if (factor == at_hand.factors.end()) {
      auto [hessian, cross] = at_hand.stats.at(target.input).Release();
      QUARK_ASSIGN_OR_RETURN(GptaqFactor made,
                             GptaqFactorOf(std::move(hessian), std::move(cross), options, weight.device()));
      at_hand.stats.erase(target.input);
      factor = at_hand.factors.emplace(target.input, std::move(made)).first;
    }
    return GptaqQuantizeWeight(weight, factor->second, target.spec, options);
  }
  AsymmetricStats& stats = at_hand.stats.at(target.input);
  auto [hessian, cross] = hand_over ? stats.Release() : std::make_pair(stats.hessian(), stats.cross());
  return AsymmetricQuantizeWeight(weight, std::move(hessian), std::move(cross), target.spec, options);
}

// The input whose statistics (or GPTAQ factor) step `s` hands on to step s + 1, or "" for none. A module never
// changes its own input, so while the steps quantize only readers of one input (true_sequential's k_proj, v_proj,
// q_proj; up_proj, gate_proj), that input's statistics stay what a new collection would give, bit for bit (the same
// forward of the same layer input): Quark collects them again, here they are kept.
std::string CarriedInput(const std::vector<std::vector<GptqTarget>>& steps, size_t s) {
  if (s + 1 >= steps.size() || steps[s].empty()) return "";
  const std::string& input = steps[s].front().input;
  for (const GptqTarget& target : steps[s]) {
    if (target.input != input) return "";
  }
  for (const GptqTarget& target : steps[s + 1]) {
    if (target.input == input) return input;
  }
  return "";
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
  InputsAtHand kept;
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    const std::vector<GptqTarget>& step = plan.steps[s];
    InputsAtHand at_hand = std::move(kept);
    kept = InputsAtHand();
    QUARK_RETURN_IF_ERROR(
        CollectStep(run, step, quantized_samples, float_samples, options.method, layer.prefix(), at_hand));
    const std::string carried = CarriedInput(plan.steps, s);
    // Qronos: the last module reading an input takes its statistics over (quantized in their memory); earlier ones,
    // and the last one of an input the next step keeps, get copies.
    std::map<std::string, const GptqTarget*> last_reader;
    for (const GptqTarget& target : step) last_reader[target.input] = &target;
    if (!carried.empty()) last_reader.erase(carried);
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
      auto result = QuantizeTarget(linear->weight(), target, hand_over, at_hand, module_options);
      if (!result.ok()) {
        return absl::Status(result.status().code(), StrCat(module, ": ", std::string(result.status().message())));
      }
      QUARK_RETURN_IF_ERROR(run.SetQuantized(target.relative_name, std::move(result->weight)));
      params[module] = std::move(result->params);
    }
    if (!carried.empty()) {
      if (auto factor = at_hand.factors.find(carried); factor != at_hand.factors.end()) {
        kept.factors.emplace(carried, std::move(factor->second));
      } else {
        kept.stats.emplace(carried, std::move(at_hand.stats.at(carried)));
      }
    }
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
