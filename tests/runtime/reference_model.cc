#include "tests/runtime/reference_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

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

at::Tensor Ln(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps) {
  const at::Tensor mean = x.mean(-1, true);
  const at::Tensor var = ((x - mean) * (x - mean)).mean(-1, true);
  return (x - mean) / at::sqrt(var + eps) * weight + bias;
}

// RoPE on one head [T, D] by the formula: pairs (i, i + D/2) rotated by t * theta^(-2i/D).
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

// One head with a sliding window, query by query: position i attends to keys max(0, i - window + 1) .. i
// (HF's convention: kv_idx > q_idx - sliding_window), softmax over exactly those keys, no mask at all.
at::Tensor WindowedHead(const at::Tensor& qh, const at::Tensor& kh, const at::Tensor& vh, int64_t window) {
  const int64_t t = qh.size(0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(qh.size(1)));
  at::Tensor out = at::zeros({t, vh.size(1)}, at::kDouble);
  for (int64_t i = 0; i < t; ++i) {
    const int64_t first = std::max<int64_t>(0, i - window + 1);
    const at::Tensor keys = kh.narrow(0, first, i - first + 1);
    const at::Tensor p = at::softmax(at::mv(keys, qh[i]) * scale, 0);
    out[i].copy_(at::mv(vh.narrow(0, first, i - first + 1).t(), p));
  }
  return out;
}

// `window` 0 = plain causal attention through a -inf mask.
at::Tensor Attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const ModelConfig& c, bool rope,
                     int64_t window) {
  const int64_t t = q.size(0), d = c.head_dim, rep = c.num_attention_heads / c.num_key_value_heads;
  const at::Tensor mask = at::full({t, t}, -std::numeric_limits<double>::infinity(), at::kDouble).triu(1);
  std::vector<at::Tensor> heads;
  for (int64_t h = 0; h < c.num_attention_heads; ++h) {
    const int64_t g = h / rep;
    at::Tensor qh = q.narrow(1, h * d, d), kh = k.narrow(1, g * d, d);
    if (rope) {
      qh = Rope(qh, c.rope_theta);
      kh = Rope(kh, c.rope_theta);
    }
    if (window > 0) {
      heads.push_back(WindowedHead(qh, kh, v.narrow(1, g * d, d), window));
      continue;
    }
    const at::Tensor p = at::softmax(at::matmul(qh, kh.t()) / std::sqrt(static_cast<double>(d)) + mask, -1);
    heads.push_back(at::matmul(p, v.narrow(1, g * d, d)));
  }
  return at::cat(heads, 1);
}

at::Tensor LlamaForward(const Weights& w, const ModelConfig& c, const at::Tensor& ids) {
  at::Tensor x = w("model.embed_tokens.weight").index_select(0, ids);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const at::Tensor h = Rms(x, w(p + "input_layernorm.weight"), c.rms_norm_eps);
    const at::Tensor a = Attention(Linear(w, p + "self_attn.q_proj", h), Linear(w, p + "self_attn.k_proj", h),
                                   Linear(w, p + "self_attn.v_proj", h), c, /*rope=*/true,
                                   checkpoint::LayerAttentionWindow(c, l));
    x = x + Linear(w, p + "self_attn.o_proj", a);
    const at::Tensor m = Rms(x, w(p + "post_attention_layernorm.weight"), c.rms_norm_eps);
    const at::Tensor gate = Linear(w, p + "mlp.gate_proj", m);
    x = x + Linear(w, p + "mlp.down_proj", gate / (1 + at::exp(-gate)) * Linear(w, p + "mlp.up_proj", m));
  }
  x = Rms(x, w("model.norm.weight"), c.rms_norm_eps);
  return at::matmul(x, w(c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight").t());
}

at::Tensor OptForward(const Weights& w, const ModelConfig& c, const at::Tensor& ids) {
  const int64_t t = ids.size(0);
  at::Tensor x = w("model.decoder.embed_tokens.weight").index_select(0, ids) +
                 w("model.decoder.embed_positions.weight").narrow(0, 2, t);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.decoder.layers." + std::to_string(l) + ".";
    const at::Tensor h = Ln(x, w(p + "self_attn_layer_norm.weight"), w(p + "self_attn_layer_norm.bias"), c.layer_norm_eps);
    const at::Tensor a = Attention(Linear(w, p + "self_attn.q_proj", h), Linear(w, p + "self_attn.k_proj", h),
                                   Linear(w, p + "self_attn.v_proj", h), c, /*rope=*/false, /*window=*/0);
    x = x + Linear(w, p + "self_attn.out_proj", a);
    const at::Tensor m = Ln(x, w(p + "final_layer_norm.weight"), w(p + "final_layer_norm.bias"), c.layer_norm_eps);
    x = x + Linear(w, p + "fc2", at::relu(Linear(w, p + "fc1", m)));
  }
  x = Ln(x, w("model.decoder.final_layer_norm.weight"), w("model.decoder.final_layer_norm.bias"), c.layer_norm_eps);
  return at::matmul(x, w("model.decoder.embed_tokens.weight").t());
}

}  // namespace

at::Tensor ReferenceLogits(const std::string& model_dir, const std::vector<int64_t>& ids) {
  const ModelConfig config = checkpoint::LoadModelConfig(model_dir).value();
  Weights weights{checkpoint::CheckpointReader::Open(model_dir).value()};
  const at::Tensor id_tensor = at::tensor(ids, at::kLong);
  return config.family == checkpoint::ArchFamily::kOpt ? OptForward(weights, config, id_tensor)
                                                       : LlamaForward(weights, config, id_tensor);
}

}  // namespace quark::runtime::testing
