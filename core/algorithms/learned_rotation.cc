#include "core/algorithms/learned_rotation.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <numeric>
#include <random>

#include <torch/torch.h>

#include "core/algorithms/cayley_sgd.h"
#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/checkpoint/model_layout.h"
#include "core/config/rotation_json.h"
#include "core/estimate/rotation_training_cost.h"
#include "core/numerics/tensor_quantizer.h"
#include "core/runtime/attention.h"

namespace quark::algorithms {
namespace {

using checkpoint::ModelConfig;

// A decoder layer's linears as RotatedWeightSource gives them with R1 = I: the norms folded into q/k/v and gate/up,
// R2 folded into v's rows and o's columns. R1 is applied on the fly: readers W R1, writers R1^T W.
struct LayerWeights {
  at::Tensor q, k, v, o, gate, up, down;
};

// The trainer's quantizers, made once per loss: a static weight spec needs a fresh quantizer per weight and step
// (its range comes from the weight as it is now); a dynamic input quantizer is reused.
struct StepQuantizers {
  const RotationTrainingScheme* scheme = nullptr;
  std::unique_ptr<TensorQuantizer> input;
};

at::Tensor ThrowIfError(absl::StatusOr<at::Tensor> t) {
  TORCH_CHECK(t.ok(), std::string(t.status().message()));
  return *std::move(t);
}

// Rounding with a straight-through gradient: the forward sees q(x), the backward passes x's gradient as is
// (SpinQuant's STEQuantize / AsymSTEQuantize).
at::Tensor StraightThrough(const at::Tensor& x, const at::Tensor& quantized) { return x + (quantized - x).detach(); }

at::Tensor FakeQuantWeight(const at::Tensor& w, const QuantSpec& spec) {
  auto quantizer = TensorQuantizer::Create(spec, TensorRole::kWeight);
  TORCH_CHECK(quantizer.ok(), std::string(quantizer.status().message()));
  const at::Tensor data = w.detach();
  TORCH_CHECK((*quantizer)->Observe(data).ok(), "observing a weight failed");
  TORCH_CHECK((*quantizer)->Freeze().ok(), "freezing a weight's quantizer failed");
  return StraightThrough(w, ThrowIfError((*quantizer)->FakeQuantize(data)));
}

// x [B, T, in] times the quantized weight [out, in]^T, the input quantized first when the scheme does.
at::Tensor QuantizedLinear(const at::Tensor& x, const at::Tensor& w, const StepQuantizers& q) {
  at::Tensor input = x;
  if (q.input) {
    const at::Tensor flat = x.detach().reshape({-1, x.size(-1)});
    input = StraightThrough(x, ThrowIfError(q.input->FakeQuantize(flat)).view(x.sizes()));
  }
  const at::Tensor weight = q.scheme->weight ? FakeQuantWeight(w, *q.scheme->weight) : w;
  return at::matmul(input, weight.t());
}

// RMSNorm with its weight folded away (RotatedWeightSource sets it to 1).
at::Tensor UnitRmsNorm(const at::Tensor& x, double eps) { return x * at::rsqrt(x.pow(2).mean(-1, true) + eps); }

absl::Status CheckLayout(const ModelConfig& m, const std::string& path) {
  const bool llama_layout = m.family == checkpoint::ArchFamily::kLlama && !m.attention_bias && !m.mlp_bias &&
                            !m.qk_norm && m.sliding_window == 0 && !checkpoint::HasRoutedExperts(m);
  if (!llama_layout) {
    return absl::UnimplementedError(StrCat(path, ".trainable: the learned rotation trains Llama layouts without biases, "
                                           "q/k norms, sliding windows or experts; ", m.model_type, " is not one"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateLearnedRotationOptions(const LearnedRotationOptions& o, const std::string& path) {
  // One set of ranges for the library and the algo_config entry (rotation_json.h).
  RotationAlgo as_entry;
  as_entry.trainable = true;
  as_entry.learning_rate = o.learning_rate;
  as_entry.max_steps = o.max_steps;
  as_entry.train_batch_size = o.train_batch_size;
  as_entry.max_memory_bytes = o.max_memory_bytes;
  return CheckRotationTrainingRanges(as_entry, path);
}

LearnedRotationOptions LearnedRotationOptionsFor(const RotationAlgo& entry) {
  LearnedRotationOptions o;
  o.learning_rate = entry.learning_rate;
  o.max_steps = entry.max_steps;
  o.train_batch_size = entry.train_batch_size;
  o.seed = entry.seed;
  o.train_r2 = entry.r2;  // Quark's trainable rotation trains every rotation it inserts
  o.max_memory_bytes = entry.max_memory_bytes;
  return o;
}

struct RotationTrainingModel::Weights {
  ModelConfig model;
  at::Tensor embed, lm_head;  // [V, H]; lm_head with the final norm folded
  std::vector<LayerWeights> layers;
  bool trains_r2 = false;
  mutable std::mutex mutex;
  mutable std::map<int64_t, std::pair<at::Tensor, at::Tensor>> rope;  // seq_len -> cos, sin
  mutable std::map<int64_t, at::Tensor> masks;
};

RotationTrainingModel::RotationTrainingModel(std::unique_ptr<Weights> weights) : weights_(std::move(weights)) {}
RotationTrainingModel::~RotationTrainingModel() = default;
const ModelConfig& RotationTrainingModel::model() const { return weights_->model; }
bool RotationTrainingModel::trains_r2() const { return weights_->trains_r2; }

absl::StatusOr<std::unique_ptr<RotationTrainingModel>> RotationTrainingModel::Load(
    const runtime::WeightSource& weights, const ModelConfig& model, const RotationOptions& init, int64_t seq_len,
    const LearnedRotationOptions& options, const std::string& path) {
  QUARK_RETURN_IF_ERROR(ValidateLearnedRotationOptions(options, path));
  QUARK_RETURN_IF_ERROR(CheckLayout(model, path));
  const int64_t needed = estimate::RotationTrainingBytes(model, seq_len, options.train_batch_size);
  if (needed > options.max_memory_bytes) {
    return absl::InvalidArgumentError(StrCat(
        path, ".max_memory_bytes: training a rotation holds the whole model and one step's graph, ~", needed >> 20,
        " MiB for ", model.num_hidden_layers, " layers with ", options.train_batch_size, " x ", seq_len,
        " tokens a step, above the budget of ", options.max_memory_bytes >> 20, " MiB"));
  }
  // RotatedWeightSource with R1 = I folds the norms (and R2) exactly as the final fold will; a non-owning view of
  // `weights` is enough for the duration of the load.
  if (options.train_r2 && !init.r2) {
    return absl::InvalidArgumentError(StrCat(path, ".train_r2: training R2 needs the rotation's r2"));
  }
  RotationOptions identity = init;
  identity.r1 = at::eye(model.hidden_size, at::kDouble);
  identity.r2 = init.r2 && !options.train_r2;  // a trained R2 is applied in the forward instead
  std::shared_ptr<const runtime::WeightSource> base(&weights, [](const runtime::WeightSource*) {});
  QUARK_ASSIGN_OR_RETURN(auto folded, RotatedWeightSource::Create(base, model, identity, path));
  auto held = std::make_unique<Weights>();
  held->model = model;
  held->trains_r2 = options.train_r2;
  const auto get = [&](const std::string& name) { return folded->Get(name, at::kFloat); };
  QUARK_ASSIGN_OR_RETURN(held->embed, get(checkpoint::EmbedTokensName(model) + ".weight"));
  QUARK_ASSIGN_OR_RETURN(held->lm_head, get("lm_head.weight"));
  for (int64_t i = 0; i < model.num_hidden_layers; ++i) {
    const std::string p = checkpoint::LayerPrefix(model, i);
    LayerWeights l;
    QUARK_ASSIGN_OR_RETURN(l.q, get(p + "self_attn.q_proj.weight"));
    QUARK_ASSIGN_OR_RETURN(l.k, get(p + "self_attn.k_proj.weight"));
    QUARK_ASSIGN_OR_RETURN(l.v, get(p + "self_attn.v_proj.weight"));
    QUARK_ASSIGN_OR_RETURN(l.o, get(p + "self_attn.o_proj.weight"));
    QUARK_ASSIGN_OR_RETURN(l.gate, get(p + "mlp.gate_proj.weight"));
    QUARK_ASSIGN_OR_RETURN(l.up, get(p + "mlp.up_proj.weight"));
    QUARK_ASSIGN_OR_RETURN(l.down, get(p + "mlp.down_proj.weight"));
    held->layers.push_back(std::move(l));
  }
  return std::unique_ptr<RotationTrainingModel>(new RotationTrainingModel(std::move(held)));
}

at::Tensor RotationTrainingModel::Loss(const at::Tensor& ids, const at::Tensor& r1, const RotationTrainingScheme& scheme,
                                       const std::vector<at::Tensor>& r2) const {
  const ModelConfig& m = weights_->model;
  const int64_t batch = ids.size(0), seq = ids.size(1);
  at::Tensor cos, sin, mask;
  {
    std::lock_guard<std::mutex> lock(weights_->mutex);
    auto it = weights_->rope.find(seq);
    if (it == weights_->rope.end()) {
      runtime::RopeTables(m, seq, at::kFloat, &cos, &sin);
      it = weights_->rope.emplace(seq, std::make_pair(cos, sin)).first;
      weights_->masks[seq] = runtime::CausalMask(seq);
    }
    std::tie(cos, sin) = it->second;
    mask = weights_->masks[seq];
  }
  StepQuantizers q;
  q.scheme = &scheme;
  if (scheme.input) {
    QuantSpec dynamic = *scheme.input;
    dynamic.is_dynamic = true;
    auto input = TensorQuantizer::Create(dynamic, TensorRole::kActivation);
    TORCH_CHECK(input.ok(), std::string(input.status().message()));
    q.input = *std::move(input);
  }
  const at::Tensor r1t = r1.t();
  const auto reader = [&](const at::Tensor& w) { return at::matmul(w, r1); };    // W R1
  const auto writer = [&](const at::Tensor& w) { return at::matmul(r1t, w); };   // R1^T W
  const int64_t heads = m.num_attention_heads, kv_heads = m.num_key_value_heads, hd = m.head_dim;
  // R2 per head as RotatedWeightSource folds it: v's rows R2^T per KV head, o's columns R2 per head.
  const auto v_rows = [&](const at::Tensor& w, size_t layer) {
    if (r2.empty()) return w;
    return at::matmul(w.t().reshape({m.hidden_size, kv_heads, hd}), r2[layer]).reshape({m.hidden_size, -1}).t();
  };
  const auto o_columns = [&](const at::Tensor& w, size_t layer) {
    if (r2.empty()) return w;
    return at::matmul(w.reshape({m.hidden_size, heads, hd}), r2[layer]).reshape({m.hidden_size, -1});
  };
  TORCH_CHECK(r2.empty() || r2.size() == weights_->layers.size(), "one R2 per layer expected");
  at::Tensor x = at::matmul(at::embedding(weights_->embed, ids), r1);  // [B, T, H]
  for (size_t li = 0; li < weights_->layers.size(); ++li) {
    const LayerWeights& l = weights_->layers[li];
    const at::Tensor h = UnitRmsNorm(x, m.rms_norm_eps);
    at::Tensor qs = QuantizedLinear(h, reader(l.q), q).view({batch, seq, heads, hd}).transpose(1, 2);
    at::Tensor ks = QuantizedLinear(h, reader(l.k), q).view({batch, seq, kv_heads, hd}).transpose(1, 2);
    at::Tensor vs = QuantizedLinear(h, v_rows(reader(l.v), li), q).view({batch, seq, kv_heads, hd}).transpose(1, 2);
    qs = runtime::ApplyRope(qs, cos, sin);
    ks = runtime::ApplyRope(ks, cos, sin);
    if (heads > kv_heads) {  // HF's repeat_kv: query head h reads KV head h / (heads / kv_heads)
      ks = ks.repeat_interleave(heads / kv_heads, 1);
      vs = vs.repeat_interleave(heads / kv_heads, 1);
    }
    const at::Tensor scores = at::matmul(qs, ks.transpose(-1, -2)) / std::sqrt(static_cast<double>(hd)) + mask;
    const at::Tensor attended = at::matmul(at::softmax(scores, -1), vs).transpose(1, 2).reshape({batch, seq, heads * hd});
    x = x + QuantizedLinear(attended, o_columns(writer(l.o), li), q);
    const at::Tensor g = UnitRmsNorm(x, m.rms_norm_eps);
    const at::Tensor act = at::silu(QuantizedLinear(g, reader(l.gate), q)) * QuantizedLinear(g, reader(l.up), q);
    x = x + QuantizedLinear(act, writer(l.down), q);
  }
  const at::Tensor logits = at::matmul(UnitRmsNorm(x, m.rms_norm_eps), reader(weights_->lm_head).t());
  const at::Tensor log_probs = at::log_softmax(logits.narrow(1, 0, seq - 1), -1);
  const at::Tensor targets = ids.narrow(1, 1, seq - 1).unsqueeze(-1);
  return -log_probs.gather(-1, targets).mean();
}

absl::StatusOr<LearnedRotation> TrainRotation(const RotationTrainingModel& model, const RotationOptions& init,
                                              const std::vector<at::Tensor>& samples,
                                              const RotationTrainingScheme& scheme,
                                              const LearnedRotationOptions& options, const std::string& path,
                                              const std::function<void(const RotationTrainingStep&)>& progress) {
  QUARK_RETURN_IF_ERROR(ValidateLearnedRotationOptions(options, path));
  if (samples.empty()) return absl::InvalidArgumentError(StrCat(path, ": the learned rotation needs calibration samples"));
  const int64_t seq = samples.front().size(-1);
  for (size_t i = 0; i < samples.size(); ++i) {
    if (samples[i].size(-1) != seq || seq < 2) {
      return absl::InvalidArgumentError(StrCat(path, ": calibration sample ", i, " has ", samples[i].size(-1),
                                               " tokens; the learned rotation trains on windows of one length >= 2 (",
                                               seq, ")"));
    }
  }
  for (const auto& [spec, role] : {std::pair{scheme.weight, TensorRole::kWeight}, {scheme.input, TensorRole::kActivation}}) {
    if (!spec) continue;
    auto made = TensorQuantizer::Create(*spec, role);
    if (!made.ok()) return absl::InvalidArgumentError(StrCat(path, ": ", std::string(made.status().message())));
  }
  at::Tensor r;
  if (init.r1.defined()) {
    r = init.r1.to(at::kDouble);
  } else {
    QUARK_ASSIGN_OR_RETURN(r, RotationFor(model.model().hidden_size, init, StrCat(path, " (R1, hidden_size)")));
  }
  if (options.train_r2 != model.trains_r2()) {
    return absl::InvalidArgumentError(StrCat(path, ".train_r2: ", options.train_r2, " here but ", model.trains_r2(),
                                             " when the training model was loaded"));
  }
  std::vector<at::Tensor> r2;
  if (options.train_r2) {
    QUARK_ASSIGN_OR_RETURN(const at::Tensor r2_init,
                           RotationFor(model.model().head_dim, init, StrCat(path, " (R2, head_dim)")));
    r2.assign(model.model().num_hidden_layers, r2_init);
  }
  std::vector<int64_t> order(samples.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(options.seed));
  CayleySgd sgd(options.seed);
  LearnedRotation result;
  const auto start = std::chrono::steady_clock::now();
  size_t next = 0;
  torch::AutoGradMode grad_mode(true);  // the caller may run under a no-grad guard
  try {
    for (int64_t k = 0; k < options.max_steps; ++k) {
      std::vector<at::Tensor> windows;
      for (int64_t b = 0; b < options.train_batch_size; ++b) {
        windows.push_back(samples[order[next++ % order.size()]].reshape({1, seq}));
      }
      const double lr = options.learning_rate * 0.5 * (1 + std::cos(M_PI * k / options.max_steps));
      // The forward in float32 (as SpinQuant's rotation parameter); the manifold step in float64, so that 100 steps
      // of the fixed-point Cayley iteration keep R1 orthogonal to ~1e-12 rather than float32's ~1e-6.
      at::Tensor leaf = r.to(at::kFloat).requires_grad_(true);
      std::vector<at::Tensor> r2_leaves;
      for (const at::Tensor& m : r2) r2_leaves.push_back(m.to(at::kFloat).requires_grad_(true));
      const at::Tensor loss = model.Loss(at::cat(windows, 0), leaf, scheme, r2_leaves);
      loss.backward();
      r = sgd.Step(r, leaf.grad().to(at::kDouble), lr);
      for (size_t i = 0; i < r2.size(); ++i) r2[i] = sgd.Step(r2[i], r2_leaves[i].grad().to(at::kDouble), lr);
      RotationTrainingStep step{k + 1, loss.item<double>(), lr};
      result.steps.push_back(step);
      if (progress) progress(step);
    }
  } catch (const c10::Error& e) {
    return absl::InternalError(StrCat(path, ": training the rotation: ", e.what_without_backtrace()));
  }
  result.r1 = r;
  result.r2 = r2;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace quark::algorithms
