// The sparse MoE block of Mixtral, Qwen2-MoE and Qwen3-MoE, as HF computes it: router logits = gate(x) in the hidden
// dtype, softmax over all experts in float32, top-k, optional renormalization of the k weights to sum 1, weights cast
// to the hidden dtype; each expert (SwiGLU: down(silu(gate(x)) * up(x))) runs only on the tokens routed to it and
// its weighted output is index-added into the result; Qwen2-MoE adds a shared expert scaled by
// sigmoid(shared_expert_gate(x)).
//
// Calibration coverage: between BeginCoverage and FinishCoverage the block counts the tokens routed to each expert and
// keeps, for each expert still short of the minimum, its best candidates among the tokens not routed to it (ranked
// by the expert's rank in the token's router order, then by its router probability). FinishCoverage runs each short
// expert on its best candidates up to the minimum, for statistics only: the block's outputs never change.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include "absl/status/status.h"
#include "core/runtime/activation_home.h"
#include "core/runtime/decoder_layer.h"
#include "core/runtime/linear.h"

namespace quark::runtime {

/// One SwiGLU expert (also the shared expert): slots filled and registered by the layer (DecoderLayer::AddLinear).
class MoeExpert : public torch::nn::Module {
 public:
  std::shared_ptr<LinearLike> gate, up, down;
  /// x [N, hidden] -> [N, hidden]; gate, then up, then down (a capture pass may stop after any of them). Virtual: an
  /// expert of another shape (gpt-oss's fused gate_up with the clamped SwiGLU, gpt_oss_layer.h) overrides it.
  virtual at::Tensor forward(const at::Tensor& x);
};

class MoeBlock : public torch::nn::Module {
 public:
  /// `router` [E, hidden] and `shared_gate` [1, hidden] in the compute dtype. `shared_gate` undefined: a shared expert
  /// (when set) is added ungated (DeepSeek-V3's shared_experts).
  MoeBlock(at::Tensor router, int64_t top_k, bool norm_topk_prob, at::Tensor shared_gate);

  /// A router's decision for flat [N, hidden]: `scores` [N, E] float32 (what ranks the experts of a token, for the
  /// coverage top-up), `weights` [N, k] (the experts' outputs are summed in this dtype, then cast to the hidden
  /// dtype) and `selected` [N, k] int64. `router` is the block's current router() [E, hidden].
  struct Routing {
    at::Tensor scores, weights, selected;
  };
  using RoutingFunction = std::function<Routing(const at::Tensor& flat, const at::Tensor& router)>;
  /// Replaces the softmax top-k routing (DeepSeek-V3's sigmoid, group-limited top-k: deepseek_layer.h).
  void set_routing(RoutingFunction routing) { routing_ = std::move(routing); }
  /// Llama 4 (HF's Llama4TextMoe): each expert reads its tokens already multiplied by their routing weight and its
  /// output is added unweighted, instead of weighting the output. Off by default.
  void set_weights_scale_inputs(bool on) { weights_scale_inputs_ = on; }

  /// The experts, in index order, and the shared expert (null when none); the layer fills their slots.
  std::vector<std::shared_ptr<MoeExpert>> experts;
  std::shared_ptr<MoeExpert> shared_expert;

  /// x [B, T, hidden] -> [B, T, hidden].
  at::Tensor forward(const at::Tensor& x);
  /// forward of each sample, bit for bit, with the experts walked once for all samples (each expert runs on every
  /// sample's tokens before the next expert starts): what keeps experts streamed in groups (expert_streaming.h) to one
  /// load per expert per pass. Every linear still sees the samples in order, and the coverage records them in order.
  /// With `activations` kept on the host, `xs` may be host tensors and the outputs are: what the block keeps of a
  /// sample between its routing and its experts (its tokens, routing weights and choices, the shared expert's output,
  /// the routed sum) stays there, and the device holds one sample's routing, then one sample's tokens of one expert.
  std::vector<at::Tensor> ForwardSamples(const std::vector<at::Tensor>& xs, const ActivationHome& activations);

  /// Starts counting (and, with min_tokens > 0, collecting top-up candidates); resets an earlier recording.
  void BeginCoverage(int64_t min_tokens);
  /// Runs the top-up, ends the recording and returns the per-expert counts (names left for the layer to fill).
  ExpertCoverage FinishCoverage();

  int64_t num_experts() const { return router_.size(0); }

  /// The router [E, hidden] and qwen2_moe's shared_expert_gate [1, hidden] (undefined without one). The scaling
  /// algorithms multiply their input columns when they divide the block's input norm (routing stays exact).
  const at::Tensor& router() const { return router_; }
  const at::Tensor& shared_gate() const { return shared_gate_; }
  void set_router(at::Tensor router) { router_ = std::move(router); }
  void set_shared_gate(at::Tensor gate) { shared_gate_ = std::move(gate); }

  /// Called with the block's input [N, hidden] at the start of each forward (a scaling algorithm's statistic over
  /// every token, routed or not); empty = none. The observer may throw to end the forward early.
  using InputObserver = std::function<void(const at::Tensor& flat)>;
  void set_input_observer(InputObserver observer) { input_observer_ = std::move(observer); }

 private:
  // The best candidates of one expert so far: token vectors [M, hidden] (compute dtype) and their keys [M] (float64,
  // lower = ranked higher: rank - probability), M <= min_tokens.
  struct Candidates {
    at::Tensor tokens;
    at::Tensor keys;
  };
  void Record(const at::Tensor& flat, const at::Tensor& probs, const at::Tensor& selected);
  Routing SoftmaxTopK(const at::Tensor& flat) const;

  at::Tensor router_;
  at::Tensor shared_gate_;
  InputObserver input_observer_;
  RoutingFunction routing_;
  bool weights_scale_inputs_ = false;
  int64_t top_k_;
  bool norm_topk_prob_;
  bool recording_ = false;
  int64_t min_tokens_ = 0;
  std::vector<int64_t> routed_;
  std::vector<Candidates> candidates_;
};

/// FAILED_PRECONDITION for an expert that no calibration token reached, neither routed nor topped up ("<expert>: no
/// calibration tokens reached this expert (...), which leaves <consumer> without statistics"). One wording for every
/// consumer of calibration statistics: static observers, GPTQ's Hessians, the scaling algorithms.
absl::Status NoExpertTokensError(const std::string& expert, const std::string& consumer, int64_t min_expert_tokens);

}  // namespace quark::runtime
