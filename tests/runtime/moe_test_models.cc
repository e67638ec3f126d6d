#include "tests/runtime/moe_test_models.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>

#include "core/base/strings.h"
#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/checkpoint_writer.h"
#include "core/checkpoint/model_layout.h"
#include "core/checkpoint/moe_layout.h"
#include "core/runtime/moe_synthetic.h"
#include "core/runtime/tensor_view.h"

namespace quark::runtime::testing {
namespace {

namespace fs = std::filesystem;
using checkpoint::ModelConfig;

struct Weights {
  std::unique_ptr<checkpoint::CheckpointReader> reader;
  at::Tensor operator()(const std::string& name) const {
    auto ref = reader->Get(name);
    if (!ref.ok()) throw std::runtime_error(std::string(ref.status().message()));
    return ViewTensor(*ref).value().to(at::kDouble);
  }
  bool Has(const std::string& name) const { return reader->Has(name); }
};

at::Tensor Linear(const Weights& w, const std::string& name, const at::Tensor& x) {
  at::Tensor y = at::matmul(x, w(name + ".weight").t());
  if (w.Has(name + ".bias")) y = y + w(name + ".bias");
  return y;
}

at::Tensor Rms(const at::Tensor& x, const at::Tensor& weight, double eps) {
  return x / at::sqrt((x * x).mean(-1, true) + eps) * weight;
}

// Rotate-half RoPE on one head [T, D] by the formula: pairs (i, i + D/2) turned by t * theta^(-2i/D).
at::Tensor Rope(const at::Tensor& x, double theta) {
  const int64_t t = x.size(0), d = x.size(1), half = d / 2;
  at::Tensor out = x.clone();
  for (int64_t i = 0; i < half; ++i) {
    const at::Tensor angle = at::arange(t, at::kDouble) * std::pow(theta, -2.0 * i / d);
    const at::Tensor a = x.select(1, i), b = x.select(1, i + half);
    out.select(1, i).copy_(a * angle.cos() - b * angle.sin());
    out.select(1, i + half).copy_(b * angle.cos() + a * angle.sin());
  }
  return out;
}

// Causal attention head by head, query by query (keys max(0, i - window + 1)..i; window 0 = all earlier keys).
at::Tensor Attention(const Weights& w, const ModelConfig& c, const std::string& p, const at::Tensor& h) {
  const at::Tensor q = Linear(w, p + "self_attn.q_proj", h), k = Linear(w, p + "self_attn.k_proj", h),
                   v = Linear(w, p + "self_attn.v_proj", h);
  const int64_t t = h.size(0), d = c.head_dim, rep = c.num_attention_heads / c.num_key_value_heads;
  std::vector<at::Tensor> heads;
  for (int64_t head = 0; head < c.num_attention_heads; ++head) {
    const int64_t g = head / rep;
    at::Tensor qh = q.narrow(1, head * d, d), kh = k.narrow(1, g * d, d);
    if (c.qk_norm) {
      qh = Rms(qh, w(p + "self_attn.q_norm.weight"), c.rms_norm_eps);
      kh = Rms(kh, w(p + "self_attn.k_norm.weight"), c.rms_norm_eps);
    }
    qh = Rope(qh, c.rope_theta);
    kh = Rope(kh, c.rope_theta);
    const at::Tensor vh = v.narrow(1, g * d, d);
    at::Tensor out = at::zeros({t, d}, at::kDouble);
    for (int64_t i = 0; i < t; ++i) {
      const int64_t first = c.sliding_window > 0 ? std::max<int64_t>(0, i - c.sliding_window + 1) : 0;
      const at::Tensor p_i = at::softmax(at::mv(kh.narrow(0, first, i - first + 1), qh[i]) / std::sqrt(double(d)), 0);
      out[i].copy_(at::mv(vh.narrow(0, first, i - first + 1).t(), p_i));
    }
    heads.push_back(out);
  }
  return Linear(w, p + "self_attn.o_proj", at::cat(heads, 1));
}

at::Tensor SwiGlu(const Weights& w, const std::string& gate, const std::string& up, const std::string& down,
                  const at::Tensor& x) {
  const at::Tensor g = Linear(w, gate, x);
  return Linear(w, down, g / (1 + at::exp(-g)) * Linear(w, up, x));
}

// One token's MoE output: all router probabilities, the experts in descending order, the first k.
at::Tensor MoeToken(const Weights& w, const ModelConfig& c, const std::string& p, const at::Tensor& m) {
  const std::string block = p + checkpoint::MoeBlockName(c);
  const at::Tensor probs = at::softmax(at::mv(w(block + ".gate.weight"), m), 0);
  std::vector<std::pair<double, int64_t>> order;
  for (int64_t e = 0; e < c.num_experts; ++e) order.push_back({probs[e].item<double>(), e});
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  double total = 0;
  for (int64_t j = 0; j < c.num_experts_per_tok; ++j) total += order[j].first;
  const auto names = checkpoint::MoeExpertProjections(c);
  at::Tensor out = at::zeros_like(m);
  for (int64_t j = 0; j < c.num_experts_per_tok; ++j) {
    const std::string e = p + checkpoint::MoeExpertName(c, order[j].second) + ".";
    const double weight = c.norm_topk_prob ? order[j].first / total : order[j].first;
    out = out + weight * SwiGlu(w, e + names.gate, e + names.up, e + names.down, m.unsqueeze(0)).squeeze(0);
  }
  if (c.shared_expert_intermediate_size > 0) {
    const std::string s = p + "mlp.shared_expert.";
    const double gate = 1 / (1 + std::exp(-at::dot(w(p + "mlp.shared_expert_gate.weight")[0], m).item<double>()));
    out = out + gate * SwiGlu(w, s + "gate_proj", s + "up_proj", s + "down_proj", m.unsqueeze(0)).squeeze(0);
  }
  return out;
}

// Runs layers [0, stop) and returns the hidden state; with `block_input`, also layer `stop`'s MoE input.
at::Tensor RunLayers(const Weights& w, const ModelConfig& c, const at::Tensor& ids, int64_t stop, at::Tensor* block_input) {
  at::Tensor x = w("model.embed_tokens.weight").index_select(0, ids);
  for (int64_t l = 0; l <= stop && l < c.num_hidden_layers; ++l) {
    const std::string p = StrCat("model.layers.", l, ".");
    x = x + Attention(w, c, p, Rms(x, w(p + "input_layernorm.weight"), c.rms_norm_eps));
    const at::Tensor m = Rms(x, w(p + "post_attention_layernorm.weight"), c.rms_norm_eps);
    if (l == stop && block_input != nullptr) {
      *block_input = m;
      return x;
    }
    std::vector<at::Tensor> rows;
    for (int64_t t = 0; t < m.size(0); ++t) rows.push_back(MoeToken(w, c, p, m[t]));
    x = x + at::stack(rows);
  }
  return x;
}

}  // namespace

ModelConfig TinyMoeConfig(const std::string& model_type) {
  return MoeSyntheticConfig(model_type, "tiny", "float32").value();
}

absl::Status WriteMoeModel(const ModelConfig& config, const std::string& dir, uint64_t seed,
                           const std::function<void(std::map<std::string, at::Tensor>&)>& edit) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::map<std::string, at::Tensor> tensors;
  for (const auto& spec : checkpoint::ModelTensors(config)) {
    const bool router = spec.name.size() > 12 && spec.name.rfind(".gate.weight") == spec.name.size() - 12;
    switch (spec.role) {
      case checkpoint::TensorRole::kNormWeight: tensors[spec.name] = 1 + at::normal(0.0, 0.1, spec.shape, generator); break;
      case checkpoint::TensorRole::kNormBias:
      case checkpoint::TensorRole::kLinearBias: tensors[spec.name] = at::normal(0.0, 0.02, spec.shape, generator); break;
      default: tensors[spec.name] = at::normal(0.0, router ? 0.5 : 0.05, spec.shape, generator); break;
    }
  }
  if (edit) edit(tensors);
  std::vector<checkpoint::PlannedTensor> plan;
  for (const auto& spec : checkpoint::ModelTensors(config)) {
    if (tensors.count(spec.name) == 0) return absl::InternalError(StrCat("no tensor for ", spec.name));
    plan.push_back({spec.name, checkpoint::StDType::kF32, spec.shape});
  }
  fs::create_directories(dir);
  auto writer = checkpoint::CheckpointWriter::Create(dir, std::move(plan));
  if (!writer.ok()) return writer.status();
  for (const auto& [name, tensor] : tensors) {
    const at::Tensor t = tensor.to(at::kFloat).contiguous();
    if (auto s = (*writer)->Write(name, std::string_view(static_cast<const char*>(t.data_ptr()), t.nbytes())); !s.ok()) {
      return s;
    }
  }
  if (auto s = (*writer)->Finish(); !s.ok()) return s;
  std::ofstream out(fs::path(dir) / "config.json", std::ios::trunc);
  out << checkpoint::ModelConfigToJson(config);
  return out ? absl::OkStatus() : absl::InternalError(StrCat("cannot write ", dir, "/config.json"));
}

std::function<void(std::map<std::string, at::Tensor>&)> StarveExpert(const ModelConfig& config, int64_t expert) {
  return [config, expert](std::map<std::string, at::Tensor>& t) {
    at::Tensor& embed = t["model.embed_tokens.weight"];
    embed.mul_(4.0);
    embed.select(1, 0).fill_(1.0);
    for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
      at::Tensor& router = t[StrCat("model.layers.", l, ".", checkpoint::MoeBlockName(config), ".gate.weight")];
      router.select(1, 0).fill_(0.0);
      router[expert][0] = -3.0;
    }
  };
}

at::Tensor MoeExpertRanking(const at::Tensor& probs, int64_t expert) {
  const at::Tensor p = probs.select(1, expert);
  const at::Tensor rank = (probs > p.unsqueeze(1)).sum(1).to(at::kDouble);
  std::vector<std::pair<std::pair<double, double>, int64_t>> keyed;
  for (int64_t t = 0; t < probs.size(0); ++t) keyed.push_back({{rank[t].item<double>(), -p[t].item<double>()}, t});
  std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<int64_t> order;
  for (const auto& k : keyed) order.push_back(k.second);
  return at::tensor(order, at::kLong);
}

at::Tensor MoeReferenceLogits(const std::string& model_dir, const std::vector<int64_t>& ids) {
  const ModelConfig c = checkpoint::LoadModelConfig(model_dir).value();
  Weights w{checkpoint::CheckpointReader::Open(model_dir).value()};
  at::Tensor x = RunLayers(w, c, at::tensor(ids, at::kLong), c.num_hidden_layers, nullptr);
  x = Rms(x, w("model.norm.weight"), c.rms_norm_eps);
  return at::matmul(x, w(c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight").t());
}

void MoeReferenceRouting(const std::string& model_dir, const std::vector<int64_t>& ids, int64_t layer,
                         at::Tensor* block_input, at::Tensor* router_probs) {
  const ModelConfig c = checkpoint::LoadModelConfig(model_dir).value();
  Weights w{checkpoint::CheckpointReader::Open(model_dir).value()};
  RunLayers(w, c, at::tensor(ids, at::kLong), layer, block_input);
  const std::string gate = StrCat("model.layers.", layer, ".", checkpoint::MoeBlockName(c), ".gate.weight");
  *router_probs = at::softmax(at::matmul(*block_input, w(gate).t()), -1);
}

}  // namespace quark::runtime::testing
