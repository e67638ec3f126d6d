#include "core/runtime/gpt_oss_attention.h"

#include <cmath>

#include "core/runtime/attention.h"

namespace quark::runtime {

at::Tensor SinkAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                         const at::Tensor& sinks, double scale) {
  const int64_t batch = q.size(0), heads = q.size(1), seq = q.size(2), dim = q.size(3), kv_heads = k.size(1);
  const int64_t group = heads / kv_heads;
  const at::ScalarType precision = at::promote_types(q.scalar_type(), at::kFloat);
  const at::Tensor additive = mask.to(precision);
  std::vector<at::Tensor> outputs;
  for (int64_t g = 0; g < kv_heads; ++g) {
    const at::Tensor qg = q.narrow(1, g * group, group).to(precision);    // [B, G, T, D]
    const at::Tensor kg = k.narrow(1, g, 1).to(precision);                // [B, 1, T, D]
    const at::Tensor vg = v.narrow(1, g, 1).to(precision);
    const at::Tensor scores = at::matmul(qg, kg.transpose(-1, -2)) * scale + additive;  // [B, G, T, T]
    const at::Tensor sink = sinks.narrow(0, g * group, group).to(precision).view({1, group, 1, 1}).expand({batch, group, seq, 1});
    at::Tensor combined = at::cat({scores, sink}, -1);                    // [B, G, T, T + 1]
    combined = combined - std::get<0>(combined.max(-1, /*keepdim=*/true));
    const at::Tensor probs = at::softmax(combined, -1).narrow(-1, 0, seq);  // the sink's share dropped
    outputs.push_back(at::matmul(probs, vg));                              // [B, G, T, D]
  }
  return at::cat(outputs, 1).transpose(1, 2).reshape({batch, seq, heads * dim}).to(q.scalar_type());
}

GptOssAttention::GptOssAttention(const checkpoint::GptOssConfig& config, at::Tensor sinks, int64_t window)
    : heads_(config.base.num_attention_heads),
      kv_heads_(config.base.num_key_value_heads),
      head_dim_(config.base.head_dim),
      window_(window),
      scale_(1.0 / std::sqrt(static_cast<double>(config.base.head_dim))),
      sinks_(std::move(sinks)) {}

at::Tensor GptOssAttention::forward(const at::Tensor& x, const LayerContext& context) {
  const int64_t batch = x.size(0), seq = x.size(1);
  const at::Tensor q = q_proj->forward(x).view({batch, seq, heads_, head_dim_}).transpose(1, 2);
  const at::Tensor k = k_proj->forward(x).view({batch, seq, kv_heads_, head_dim_}).transpose(1, 2);
  const at::Tensor v = v_proj->forward(x).view({batch, seq, kv_heads_, head_dim_}).transpose(1, 2);
  const at::Tensor& mask = window_ > 0 && context.sliding_mask.defined() ? context.sliding_mask : context.mask;
  const at::Tensor out = SinkAttention(ApplyRope(q, context.cos, context.sin), ApplyRope(k, context.cos, context.sin), v,
                                       mask, sinks_, scale_);
  return o_proj->forward(out);
}

}  // namespace quark::runtime
