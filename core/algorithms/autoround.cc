#include "core/algorithms/autoround.h"

#include <ATen/core/grad_mode.h>  // at::NoGradGuard (LibTorch 2.11 no longer brings it with ATen.h)

#include <algorithm>
#include <limits>
#include <memory>
#include <numeric>
#include <random>

#include <torch/csrc/autograd/autograd.h>

#include "core/algorithms/autoround_qdq.h"
#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/runtime/eager_powers.h"
#include "core/runtime/linear.h"
#include "core/runtime/layer_streamer.h"

namespace quark::algorithms {
namespace {

// A target linear while it is tuned: y = x w'^T + b with w' = AutoRoundQdq(w), in float32.
class TrainableLinear : public runtime::LinearLike {
 public:
  TrainableLinear(at::Tensor weight, at::Tensor bias, AutoRoundTensors tuned, QuantSpec spec)
      : weight_(std::move(weight)), bias_(std::move(bias)), tuned_(std::move(tuned)), spec_(std::move(spec)) {}
  at::Tensor forward(const at::Tensor& input) override {
    const at::Tensor w = AutoRoundQdq(weight_, tuned_, spec_);
    const at::Tensor b = bias_.defined() ? bias_.to(at::kFloat) : bias_;
    return at::linear(input.to(at::kFloat), w, b).to(input.scalar_type());
  }
  int64_t in_features() const override { return weight_.size(1); }
  int64_t out_features() const override { return weight_.size(0); }
  at::Tensor weight() const override { return weight_; }
  at::Tensor bias() const override { return bias_; }
  const AutoRoundTensors& tuned() const { return tuned_; }

 private:
  at::Tensor weight_;
  at::Tensor bias_;
  AutoRoundTensors tuned_;
  QuantSpec spec_;
};

// auto-round's IndexSampler: a shuffled cycle of the sample indices, reshuffled when fewer than a batch are left.
class IndexSampler {
 public:
  IndexSampler(size_t n, size_t batch, uint32_t seed) : batch_(batch), order_(n), random_(seed) {
    std::iota(order_.begin(), order_.end(), size_t{0});
    std::shuffle(order_.begin(), order_.end(), random_);
  }
  std::vector<size_t> Next() {
    if (next_ + batch_ > order_.size()) {
      std::shuffle(order_.begin(), order_.end(), random_);
      next_ = 0;
    }
    std::vector<size_t> out(order_.begin() + next_, order_.begin() + next_ + batch_);
    next_ += batch_;
    return out;
  }

 private:
  size_t batch_;
  std::vector<size_t> order_;
  std::mt19937 random_;
  size_t next_ = 0;
};

struct Tuned {
  AutoRoundTarget target;
  std::shared_ptr<runtime::FloatLinear> original;
  std::shared_ptr<TrainableLinear> trainable;
};

absl::Status CheckOptions(const AutoRoundOptions& o) {
  if (o.iters <= 0) return absl::InvalidArgumentError(StrCat("iters: must be positive, got ", o.iters));
  if (!(o.lr > 0 && o.lr <= 1)) return absl::InvalidArgumentError(StrCat("lr: must be in (0, 1], got ", o.lr));
  if (!(o.minmax_lr > 0 && o.minmax_lr <= 1)) {
    return absl::InvalidArgumentError(StrCat("minmax_lr: must be in (0, 1], got ", o.minmax_lr));
  }
  if (o.batch_size <= 0 || o.gradient_accumulate_steps <= 0) {
    return absl::InvalidArgumentError("batch_size, gradient_accumulate_steps: must be positive");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Tuned>> SwapIn(runtime::DecoderLayer& layer, const std::vector<AutoRoundTarget>& targets) {
  std::vector<Tuned> out;
  for (const AutoRoundTarget& target : targets) {
    const std::string name = layer.prefix() + target.relative_name;
    auto linear = std::dynamic_pointer_cast<runtime::FloatLinear>(layer.FindLinear(target.relative_name));
    if (linear == nullptr) return absl::InvalidArgumentError(StrCat(name, ": AutoRound tunes float linears only"));
    auto tensors = InitAutoRoundTensors(linear->weight(), target.spec);
    if (!tensors.ok()) return absl::InvalidArgumentError(StrCat(name, ".weight.", std::string(tensors.status().message())));
    auto trainable = std::make_shared<TrainableLinear>(linear->weight(), linear->bias(), *std::move(tensors), target.spec);
    QUARK_RETURN_IF_ERROR(layer.ReplaceLinear(target.relative_name, trainable));
    out.push_back({target, linear, trainable});
  }
  return out;
}

std::vector<at::Tensor> Parameters(const std::vector<Tuned>& tuned, bool minmax) {
  std::vector<at::Tensor> out;
  for (const Tuned& t : tuned) {
    out.push_back(t.trainable->tuned().value);
    if (minmax) {
      out.push_back(t.trainable->tuned().min_scale);
      out.push_back(t.trainable->tuned().max_scale);
    }
  }
  return out;
}

std::vector<at::Tensor> Snapshot(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& p : params) out.push_back(p.detach().clone());
  return out;
}

// One iteration's loss over `batch` (mean squared error over all its elements) and the summed gradients. The targets
// are kept in the compute dtype where the activations are (float32 from them is exact); the per-sample losses are
// added on the device in float64, in batch order (the additions a host loop over their values makes), and read once.
double BatchLossAndGradients(const std::vector<size_t>& batch, const std::vector<at::Tensor>& samples,
                             const std::vector<at::Tensor>& targets, const BlockForward& forward,
                             const std::vector<at::Tensor>& params, std::vector<at::Tensor>& grads,
                             const runtime::ActivationHome& activations) {
  double elements = 0;
  for (size_t i : batch) elements += static_cast<double>(targets[i].numel());
  at::Tensor loss;
  for (size_t i : batch) {
    const at::Tensor out = forward(samples[i]).to(at::kFloat);
    // Squared: eager pow(d, 2)'s bits on every device, and its gradient's (grad * d + grad * d is grad * (2 * d) but
    // where the product is subnormal). A float32 0-dim divisor divides as the double scalar did (converted to
    // float32 first); the double scalar became a float64 tensor in LibTorch 2.6's lazy backward and met the float32
    // weights in a matmul.
    const at::Tensor squares = runtime::Squared(out - activations.Place(targets[i]).to(at::kFloat)).sum();
    const at::Tensor l = squares / at::scalar_tensor(elements, squares.options());
    const at::Tensor value = l.detach().to(at::kDouble);
    loss = loss.defined() ? loss + value : value;
    const auto g = torch::autograd::grad({l}, params, /*grad_outputs=*/{}, /*retain_graph=*/false,
                                         /*create_graph=*/false, /*allow_unused=*/true);
    for (size_t k = 0; k < params.size(); ++k) {
      if (!g[k].defined()) continue;
      grads[k] = grads[k].defined() ? grads[k] + g[k] : g[k];
    }
  }
  return loss.defined() ? loss.item<double>() : 0.0;
}

// SignSGD (weight decay 0, no momentum): p -= lr * sign(g); the clipping factors stay in [0, 1].
void SignStep(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads, double lr, double minmax_lr) {
  at::NoGradGuard no_grad;
  for (size_t k = 0; k < params.size(); ++k) {
    if (!grads[k].defined()) continue;
    const bool is_value = params[k].dim() == 3;
    params[k].sub_(at::sign(grads[k]), is_value ? lr : minmax_lr);
    if (!is_value) params[k].clamp_(0.0, 1.0);
  }
}

absl::StatusOr<AutoRoundLayerResult> Train(std::vector<Tuned>& tuned, const std::vector<at::Tensor>& samples,
                                           const std::vector<at::Tensor>& targets, const BlockForward& forward,
                                           const AutoRoundOptions& o, const AutoRoundCallbacks& callbacks,
                                           const runtime::ActivationHome& activations) {
  const std::vector<at::Tensor> params = Parameters(tuned, o.enable_minmax_tuning);
  const size_t global_batch =
      std::min(samples.size(), static_cast<size_t>(o.batch_size) * static_cast<size_t>(o.gradient_accumulate_steps));
  IndexSampler sampler(samples.size(), global_batch, o.seed);
  AutoRoundLayerResult result;
  result.best_loss = std::numeric_limits<double>::max();
  std::vector<at::Tensor> best;
  for (int i = 0; i < o.iters; ++i) {
    if (callbacks.cancelled && callbacks.cancelled()) {
      return absl::CancelledError(StrCat("autoround cancelled at iteration ", i));
    }
    std::vector<at::Tensor> grads(params.size());
    const double loss = BatchLossAndGradients(sampler.Next(), samples, targets, forward, params, grads, activations);
    if (i == 0) result.first_loss = loss;
    if (loss < result.best_loss) {
      result.best_loss = loss;
      if (!o.not_use_best_mse) {
        best = Snapshot(params);
        result.best_iter = i;
      }
    }
    if (o.not_use_best_mse && i == o.iters - 1) {
      best = Snapshot(params);
      result.best_loss = loss;
      result.best_iter = i;
    }
    if (callbacks.on_iteration) callbacks.on_iteration(i, loss);
    // torch's LinearLR(start_factor 1, end_factor 0, total_iters = iters) after i scheduler steps.
    const double factor = 1.0 - static_cast<double>(i) / o.iters;
    SignStep(params, grads, o.lr * factor, o.minmax_lr * factor);
  }
  at::NoGradGuard no_grad;
  for (size_t k = 0; k < params.size(); ++k) params[k].copy_(best[k]);
  return result;
}

// Puts the original linears back with their rounded weights; counts the changed rounding choices.
absl::Status Finish(runtime::DecoderLayer& layer, std::vector<Tuned>& tuned, AutoRoundLayerResult& result) {
  for (Tuned& t : tuned) {
    const std::string name = layer.prefix() + t.target.relative_name;
    auto rounded = FinishAutoRound(t.original->weight(), t.trainable->tuned(), t.target.spec);
    if (!rounded.ok()) return absl::Status(rounded.status().code(), StrCat(name, ".weight: ", std::string(rounded.status().message())));
    {
      at::NoGradGuard no_grad;
      const at::Tensor& v = t.trainable->tuned().value;
      const at::Tensor w = t.original->weight().to(at::kFloat).reshape(v.sizes());
      const at::Tensor s = rounded->params.scale.to(at::kFloat).reshape({v.size(0), v.size(1), 1});
      const at::Tensor x = w * at::reciprocal(s);
      result.changed_roundings += at::ne(at::round(x + v), at::round(x)).sum().item<int64_t>();
      result.weights += v.numel();
    }
    t.original->set_weight(rounded->weight);
    QUARK_RETURN_IF_ERROR(layer.ReplaceLinear(t.target.relative_name, t.original));
    result.params[name] = std::move(rounded->params);
  }
  return absl::OkStatus();
}

}  // namespace

AutoRoundOptions ResolveAutoRoundOptions(const AutoRoundAlgo& algo) {
  AutoRoundOptions o;
  o.iters = algo.iters;
  o.lr = algo.lr ? *algo.lr : 1.0 / std::max(algo.iters, 1);
  o.minmax_lr = algo.minmax_lr ? *algo.minmax_lr : o.lr;
  o.batch_size = algo.batch_size;
  o.gradient_accumulate_steps = algo.gradient_accumulate_steps;
  o.enable_minmax_tuning = algo.enable_minmax_tuning;
  o.not_use_best_mse = algo.not_use_best_mse;
  o.seed = static_cast<uint32_t>(algo.seed);
  return o;
}

absl::StatusOr<AutoRoundLayerResult> AutoRoundQuantizeLayer(runtime::DecoderLayer& layer,
                                                            const std::vector<at::Tensor>& samples,
                                                            const BlockForward& forward,
                                                            const std::vector<AutoRoundTarget>& targets,
                                                            const AutoRoundOptions& options,
                                                            const AutoRoundCallbacks& callbacks,
                                                            const runtime::ActivationHome& activations) {
  QUARK_RETURN_IF_ERROR(CheckOptions(options));
  if (samples.empty()) return absl::InvalidArgumentError(StrCat(layer.prefix(), ": AutoRound needs calibration samples"));
  if (targets.empty()) return AutoRoundLayerResult{};
  try {
    std::vector<at::Tensor> float_outputs;
    {
      at::NoGradGuard no_grad;
      for (const at::Tensor& s : samples) float_outputs.push_back(activations.Hold(forward(s)));
    }
    QUARK_ASSIGN_OR_RETURN(std::vector<Tuned> tuned, SwapIn(layer, targets));
    at::AutoGradMode grad(true);
    auto result = Train(tuned, samples, float_outputs, forward, options, callbacks, activations);
    if (!result.ok()) {
      for (Tuned& t : tuned) (void)layer.ReplaceLinear(t.target.relative_name, t.original);
      return result.status();
    }
    QUARK_RETURN_IF_ERROR(Finish(layer, tuned, *result));
    return result;
  } catch (const std::exception& error) {
    return runtime::TorchErrorToStatus(error, StrCat(layer.prefix(), " (autoround)"));
  }
}

}  // namespace quark::algorithms
