#include "core/export/onnx_llama_graph.h"

#include <cmath>
#include <limits>

#include "core/base/strings.h"
#include "core/checkpoint/model_layout.h"
#include "core/export/onnx_torch_order.h"
#include "core/runtime/attention.h"

namespace quark::exporter::onnx_export {
namespace {

using G = OnnxGraph;

std::string Scalar(OnnxGraph& g, const std::string& one_element, const std::string& name) {
  return g.Op("Squeeze", {one_element, g.ConstI64({0})}, name);
}

}  // namespace

absl::Status LlamaGraph::Begin() {
  const std::string batch = "batch_size", seq = "sequence_length", total = "total_sequence_length";
  g_.AddInput("input_ids", kOnnxInt64, {batch, seq});
  g_.AddInput("attention_mask", kOnnxInt64, {batch, total});
  g_.AddInput("position_ids", kOnnxInt64, {batch, seq});
  const std::string kv = std::to_string(model_.num_key_value_heads), dim = std::to_string(model_.head_dim);
  if (kv_cache_) {
    for (int64_t i = 0; i < model_.num_hidden_layers; ++i) {
      for (const char* which : {"key", "value"}) {
        g_.AddInput(StrCat("past_key_values.", i, ".", which), kOnnxFloat, {batch, kv, "past_sequence_length", dim});
      }
    }
  }
  // The embedding table is written at End (it may be the tied lm_head, and the model's algorithms may change it).
  hidden_ = g_.Op("Gather", {checkpoint::EmbedTokensName(model_) + ".weight", "input_ids"}, "embedded");

  // RoPE: the engine's own tables for every position the model allows, gathered by position_ids.
  at::Tensor cos, sin;
  runtime::RopeTables(model_, model_.max_position_embeddings, at::kFloat, &cos, &sin);
  auto cos_table = g_.FloatInitializer("rope.cos", cos);
  if (!cos_table.ok()) return cos_table.status();
  auto sin_table = g_.FloatInitializer("rope.sin", sin);
  if (!sin_table.ok()) return sin_table.status();
  const std::string heads_axis = g_.ConstI64({1});
  cos_ = g_.Op("Unsqueeze", {g_.Op("Gather", {*cos_table, "position_ids"}, "rope_cos"), heads_axis}, "rope_cos_b");
  sin_ = g_.Op("Unsqueeze", {g_.Op("Gather", {*sin_table, "position_ids"}, "rope_sin"), heads_axis}, "rope_sin_b");

  // Query i of this call is token past + i; key j is token j. Visible: j <= past + i, and attention_mask[b, j] != 0.
  const std::string t = Scalar(g_, g_.Op("Shape", {"input_ids"}, "seq_len_1", {G::Int("start", 1)}), "seq_len");
  const std::string s = Scalar(g_, g_.Op("Shape", {"attention_mask"}, "total_len_1", {G::Int("start", 1)}), "total_len");
  const std::string zero = g_.ConstI64({0}, true), one = g_.ConstI64({1}, true);
  const std::string past = g_.Op("Sub", {s, t}, "past_len");
  const std::string q_pos = g_.Op("Unsqueeze", {g_.Op("Range", {past, s, one}, "query_pos"), g_.ConstI64({1})}, "q_col");
  const std::string k_pos = g_.Op("Unsqueeze", {g_.Op("Range", {zero, s, one}, "key_pos"), g_.ConstI64({0})}, "k_row");
  const std::string causal = g_.Op("LessOrEqual", {k_pos, q_pos}, "causal");  // [T, S]
  const std::string padding = g_.Op("Unsqueeze", {g_.Op("Cast", {"attention_mask"}, "mask_bool", {G::Int("to", kOnnxBool)}),
                                                  g_.ConstI64({1, 2, 3})}, "mask_b");  // [B, 1, 1, 1, S]
  mask_ = g_.Op("And", {causal, padding}, "visible");  // [B, 1, 1, T, S]
  if (model_.sliding_window > 0) {
    // Sliding window: also i - window < j.
    const std::string lower = g_.Op("Sub", {q_pos, g_.ConstI64({model_.sliding_window}, true)}, "window_start");
    const std::string in_window = g_.Op("Greater", {k_pos, lower}, "in_window");
    window_mask_ = g_.Op("And", {mask_, in_window}, "visible_window");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> LlamaGraph::RmsNorm(const std::string& x, const std::string& weight_name,
                                                const runtime::WeightSource& weights) {
  auto w = weights.Get(weight_name, at::kFloat);
  if (!w.ok()) return w.status();
  if (w->dim() != 1 || w->size(0) != model_.hidden_size) {
    return absl::InvalidArgumentError(StrCat(weight_name, ": expected [", model_.hidden_size, "]"));
  }
  auto init = g_.FloatInitializer(weight_name, *w);
  if (!init.ok()) return init.status();
  return RmsNormNodes(g_, x, *init, model_.hidden_size, static_cast<float>(model_.rms_norm_eps), "norm");
}

std::string LlamaGraph::Rope(const std::string& x, const std::string& name) {
  // rotate_half(x) = cat(-x[..., D/2:], x[..., :D/2]); x * cos + rotate_half(x) * sin.
  const int64_t half = model_.head_dim / 2;
  const std::string axis = g_.ConstI64({-1});
  const std::string x1 = g_.Op("Slice", {x, g_.ConstI64({0}), g_.ConstI64({half}), axis}, name + "_x1");
  const std::string x2 = g_.Op("Slice", {x, g_.ConstI64({half}), g_.ConstI64({model_.head_dim}), axis}, name + "_x2");
  const std::string rotated = g_.Op("Concat", {g_.Op("Neg", {x2}, name + "_neg"), x1}, name + "_rot", {G::Int("axis", -1)});
  return g_.Op("Add", {g_.Op("Mul", {x, cos_}, name + "_cos"), g_.Op("Mul", {rotated, sin_}, name + "_sin")}, name + "_rope");
}

std::string LlamaGraph::Attention(int64_t index, const std::string& q, const std::string& k, const std::string& v) {
  const int64_t heads = model_.num_attention_heads, kv = model_.num_key_value_heads, dim = model_.head_dim;
  const std::string p = StrCat("l", index, "_");
  std::string keys = k, values = v;  // [B, KV, T, D]
  if (kv_cache_) {
    keys = StrCat("present.", index, ".key");
    values = StrCat("present.", index, ".value");
    g_.OpTo("Concat", {StrCat("past_key_values.", index, ".key"), k}, {keys}, {G::Int("axis", 2)});
    g_.OpTo("Concat", {StrCat("past_key_values.", index, ".value"), v}, {values}, {G::Int("axis", 2)});
    const std::string kvs = std::to_string(kv), dims = std::to_string(dim);
    g_.AddOutput(keys, kOnnxFloat, {"batch_size", kvs, "total_sequence_length", dims});
    g_.AddOutput(values, kOnnxFloat, {"batch_size", kvs, "total_sequence_length", dims});
  }
  // Query heads sharing a KV head side by side: q [B, KV, rep, T, D] against k, v [B, KV, 1, S, D] (broadcast).
  const std::string q5 = g_.Op("Reshape", {q, g_.ConstI64({0, kv, heads / kv, -1, dim})}, p + "q_grouped");
  const std::string k5 = g_.Op("Unsqueeze", {keys, g_.ConstI64({2})}, p + "k_grouped");
  const std::string v5 = g_.Op("Unsqueeze", {values, g_.ConstI64({2})}, p + "v_grouped");
  const std::string kt = g_.Op("Transpose", {k5}, p + "k_t", {G::Ints("perm", {0, 1, 2, 4, 3})});
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim)));
  const std::string scores = g_.Op("Mul", {g_.Op("MatMul", {q5, kt}, p + "qk"), g_.ConstF32(scale)}, p + "scores");
  // A hidden key gets the lowest float rather than -inf, so that a fully padded row gives no NaN; any visible
  // key then makes its exp exactly 0, as -inf does in the engine.
  const std::string& visible = checkpoint::LayerAttentionWindow(model_, index) > 0 ? window_mask_ : mask_;
  const std::string masked =
      g_.Op("Where", {visible, scores, g_.ConstF32(std::numeric_limits<float>::lowest())}, p + "masked");
  const std::string probs = g_.Op("Softmax", {masked}, p + "probs", {G::Int("axis", -1)});
  const std::string out = g_.Op("MatMul", {probs, v5}, p + "attended");  // [B, KV, rep, T, D]
  const std::string bhtd = g_.Op("Reshape", {out, g_.ConstI64({0, heads, -1, dim})}, p + "attended_heads");
  const std::string bthd = g_.Op("Transpose", {bhtd}, p + "attended_t", {G::Ints("perm", {0, 2, 1, 3})});
  return g_.Op("Reshape", {bthd, g_.ConstI64({0, 0, heads * dim})}, p + "attended_flat");
}

absl::Status LlamaGraph::Layer(int64_t index, const runtime::WeightSource& weights, const LinearBuilder& linear) {
  const std::string prefix = checkpoint::LayerPrefix(model_, index);
  const int64_t heads = model_.num_attention_heads, kv = model_.num_key_value_heads, dim = model_.head_dim;
  const int64_t h = model_.hidden_size;
  auto x = RmsNorm(hidden_, prefix + "input_layernorm.weight", weights);
  if (!x.ok()) return x.status();
  auto q = linear(prefix + "self_attn.q_proj", *x, h);
  if (!q.ok()) return q.status();
  auto k = linear(prefix + "self_attn.k_proj", *x, h);
  if (!k.ok()) return k.status();
  auto v = linear(prefix + "self_attn.v_proj", *x, h);
  if (!v.ok()) return v.status();
  const std::string p = StrCat("l", index, "_");
  const auto heads_first = [&](const std::string& t, int64_t n, const std::string& name) {
    const std::string split = g_.Op("Reshape", {t, g_.ConstI64({0, 0, n, dim})}, p + name + "_split");
    return g_.Op("Transpose", {split}, p + name + "_heads", {G::Ints("perm", {0, 2, 1, 3})});  // [B, n, T, D]
  };
  const std::string qr = Rope(heads_first(*q, heads, "q"), p + "q");
  const std::string kr = Rope(heads_first(*k, kv, "k"), p + "k");
  const std::string attended = Attention(index, qr, kr, heads_first(*v, kv, "v"));
  auto o = linear(prefix + "self_attn.o_proj", attended, heads * dim);
  if (!o.ok()) return o.status();
  hidden_ = g_.Op("Add", {hidden_, *o}, p + "attn_residual");

  auto x2 = RmsNorm(hidden_, prefix + "post_attention_layernorm.weight", weights);
  if (!x2.ok()) return x2.status();
  auto gate = linear(prefix + "mlp.gate_proj", *x2, h);
  if (!gate.ok()) return gate.status();
  auto up = linear(prefix + "mlp.up_proj", *x2, h);
  if (!up.ok()) return up.status();
  const std::string act = SiluNodes(g_, *gate, p + "gate");
  auto down = linear(prefix + "mlp.down_proj", g_.Op("Mul", {act, *up}, p + "gated"), model_.intermediate_size);
  if (!down.ok()) return down.status();
  hidden_ = g_.Op("Add", {hidden_, *down}, p + "mlp_residual");
  return absl::OkStatus();
}

absl::Status LlamaGraph::End(const runtime::WeightSource& weights) {
  auto normed = RmsNorm(hidden_, checkpoint::FinalNormName(model_) + ".weight", weights);
  if (!normed.ok()) return normed.status();
  const std::string embed_name = checkpoint::EmbedTokensName(model_) + ".weight";
  auto embed = weights.Get(embed_name, at::kFloat);
  if (!embed.ok()) return embed.status();
  if (auto s = g_.FloatInitializer(embed_name, *embed); !s.ok()) return s.status();
  std::string head;  // [H, V]
  if (model_.tie_word_embeddings) {
    head = g_.Op("Transpose", {embed_name}, "lm_head_tied", {G::Ints("perm", {1, 0})});
  } else {
    auto w = weights.Get("lm_head.weight", at::kFloat);
    if (!w.ok()) return w.status();
    auto init = g_.FloatInitializer("lm_head.weight", w->t().contiguous());
    if (!init.ok()) return init.status();
    head = *init;
  }
  g_.OpTo("MatMul", {*normed, head}, {"logits"});
  g_.AddOutput("logits", kOnnxFloat, {"batch_size", "sequence_length", std::to_string(model_.vocab_size)});
  return absl::OkStatus();
}

}  // namespace quark::exporter::onnx_export
