#include "tests/runtime/gemma_reference.h"

#include <algorithm>
#include <cmath>

#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/model_config.h"
#include "core/runtime/tensor_view.h"

namespace quark::runtime::testing {
namespace {

using checkpoint::ModelConfig;

struct Weights {
  std::unique_ptr<checkpoint::CheckpointReader> reader;
  at::Tensor operator()(const std::string& name) const {
    auto ref = reader->Get(name);
    if (!ref.ok()) throw std::runtime_error(std::string(ref.status().message()));
    return ViewTensor(*ref).value().to(at::kDouble);
  }
};

at::Tensor Linear(const Weights& w, const std::string& name, const at::Tensor& x) {
  return at::matmul(x, w(name + ".weight").t());
}

// Gemma2RMSNorm / Gemma3RMSNorm: x / sqrt(mean(x^2) + eps) * (1 + w).
at::Tensor GemmaRms(const at::Tensor& x, const at::Tensor& w, double eps) {
  return x / at::sqrt((x * x).mean(-1, true) + eps) * (1 + w);
}

// gelu_pytorch_tanh: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
at::Tensor GeluTanh(const at::Tensor& x) {
  return 0.5 * x * (1 + at::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

at::Tensor SoftCap(const at::Tensor& x, double cap) { return cap > 0 ? at::tanh(x / cap) * cap : x; }

// RoPE on one head [T, D]: pairs (i, i + D/2) rotated by (t / factor) * base^(-2i/D).
at::Tensor Rope(const at::Tensor& x, double base, double factor) {
  const int64_t t = x.size(0), d = x.size(1), half = d / 2;
  at::Tensor out = x.clone();
  for (int64_t i = 0; i < half; ++i) {
    const at::Tensor angle = at::arange(t, at::kDouble) / factor * std::pow(base, -2.0 * i / d);
    const at::Tensor a = x.select(1, i), b = x.select(1, i + half);
    out.select(1, i).copy_(a * angle.cos() - b * angle.sin());
    out.select(1, i + half).copy_(b * angle.cos() + a * angle.sin());
  }
  return out;
}

// One head, query by query: position i sees keys max(0, i - window + 1) .. i (all keys up to i when window is 0);
// scores scaled, soft-capped, softmaxed over exactly those keys.
at::Tensor Head(const at::Tensor& qh, const at::Tensor& kh, const at::Tensor& vh, int64_t window, double scale,
                double softcap) {
  const int64_t t = qh.size(0);
  at::Tensor out = at::zeros({t, vh.size(1)}, at::kDouble);
  for (int64_t i = 0; i < t; ++i) {
    const int64_t first = window > 0 ? std::max<int64_t>(0, i - window + 1) : 0;
    const at::Tensor keys = kh.narrow(0, first, i - first + 1);
    const at::Tensor p = at::softmax(SoftCap(at::mv(keys, qh[i]) * scale, softcap), 0);
    out[i].copy_(at::mv(vh.narrow(0, first, i - first + 1).t(), p));
  }
  return out;
}

at::Tensor Attention(const Weights& w, const std::string& p, const at::Tensor& x, const ModelConfig& c, int64_t layer) {
  const int64_t d = c.head_dim, rep = c.num_attention_heads / c.num_key_value_heads;
  const int64_t window = checkpoint::LayerAttentionWindow(c, layer);
  const bool gemma3 = c.model_type == "gemma3_text";
  // Gemma 3: sliding layers use rope_local_base_freq, unscaled; global ones rope_theta with rope_scaling.
  const bool local = gemma3 && window > 0;
  const double base = local ? c.rope_local_base_freq : c.rope_theta;
  const double factor = !local && c.rope_scaling ? c.rope_scaling->factor : 1.0;
  const at::Tensor q = Linear(w, p + "self_attn.q_proj", x), k = Linear(w, p + "self_attn.k_proj", x);
  const at::Tensor v = Linear(w, p + "self_attn.v_proj", x);
  std::vector<at::Tensor> heads;
  for (int64_t h = 0; h < c.num_attention_heads; ++h) {
    const int64_t g = h / rep;
    at::Tensor qh = q.narrow(1, h * d, d), kh = k.narrow(1, g * d, d);
    if (gemma3) {
      qh = GemmaRms(qh, w(p + "self_attn.q_norm.weight"), c.rms_norm_eps);
      kh = GemmaRms(kh, w(p + "self_attn.k_norm.weight"), c.rms_norm_eps);
    }
    heads.push_back(Head(Rope(qh, base, factor), Rope(kh, base, factor), v.narrow(1, g * d, d), window,
                         1.0 / std::sqrt(c.query_pre_attn_scalar), c.attn_logit_softcapping));
  }
  return Linear(w, p + "self_attn.o_proj", at::cat(heads, 1));
}

}  // namespace

at::Tensor GemmaReferenceLogits(const std::string& model_dir, const std::vector<int64_t>& ids) {
  const ModelConfig c = checkpoint::LoadModelConfig(model_dir).value();
  const Weights w{checkpoint::CheckpointReader::Open(model_dir).value()};
  const double eps = c.rms_norm_eps;
  at::Tensor x = w("model.embed_tokens.weight").index_select(0, at::tensor(ids, at::kLong)) *
                 std::sqrt(static_cast<double>(c.hidden_size));
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const at::Tensor a = Attention(w, p, GemmaRms(x, w(p + "input_layernorm.weight"), eps), c, l);
    x = x + GemmaRms(a, w(p + "post_attention_layernorm.weight"), eps);
    const at::Tensor m = GemmaRms(x, w(p + "pre_feedforward_layernorm.weight"), eps);
    const at::Tensor f = Linear(w, p + "mlp.down_proj",
                                GeluTanh(Linear(w, p + "mlp.gate_proj", m)) * Linear(w, p + "mlp.up_proj", m));
    x = x + GemmaRms(f, w(p + "post_feedforward_layernorm.weight"), eps);
  }
  x = GemmaRms(x, w("model.norm.weight"), eps);
  return SoftCap(at::matmul(x, w("model.embed_tokens.weight").t()), c.final_logit_softcapping);
}

}  // namespace quark::runtime::testing
