// The Phi-3 decoder layer: Llama's math (RMSNorm, RoPE attention with grouped KV heads, SwiGLU MLP) over the
// fused linears Phi-3 ships: self_attn.qkv_proj (rows q | k | v) and mlp.gate_up_proj (rows gate | up). The
// fused linears stay whole, one GEMM each, so the quantizer sees and exports exactly HF's modules (vLLM loads
// qkv_proj and gate_up_proj as they are); their outputs are split after the GEMM.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "core/checkpoint/model_config.h"
#include "core/runtime/attention.h"
#include "core/runtime/decoder_layer.h"
#include "core/runtime/weight_source.h"

namespace quark::runtime {

class Phi3Attention : public torch::nn::Module {
 public:
  std::shared_ptr<LinearLike> qkv_proj, o_proj;
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
  int64_t window = 0;  // sliding window (0 = none): attends with context.sliding_mask
  at::Tensor forward(const at::Tensor& x, const LayerContext& context);
};

class Phi3Mlp : public torch::nn::Module {
 public:
  std::shared_ptr<LinearLike> gate_up_proj, down_proj;
  int64_t intermediate = 0;
  at::Tensor forward(const at::Tensor& x);
};

class Phi3DecoderLayer : public DecoderLayer {
 public:
  /// Loads layer `index` from `weights` as `dtype`; errors name the missing or mis-shaped tensor.
  static absl::StatusOr<std::shared_ptr<Phi3DecoderLayer>> Load(const checkpoint::ModelConfig& config, int64_t index,
                                                                const WeightSource& weights, at::ScalarType dtype);
  at::Tensor forward(const at::Tensor& hidden, const LayerContext& context) override;

  std::shared_ptr<RmsNorm> input_layernorm, post_attention_layernorm;
  std::shared_ptr<Phi3Attention> self_attn;
  std::shared_ptr<Phi3Mlp> mlp;

 private:
  Phi3DecoderLayer(int64_t index, std::string prefix) : DecoderLayer(index, std::move(prefix)) {}
};

}  // namespace quark::runtime
