// A decoder layer as a torch::nn::Module whose children carry the HF names (self_attn.q_proj, mlp.down_proj,
// input_layernorm, ...), with its linears listed and replaceable by name: the seam the quantizer plugs into.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include "absl/status/status.h"
#include "core/checkpoint/model_layout.h"
#include "core/runtime/linear.h"

namespace quark::runtime {

/// What every layer of one forward pass shares (built once per sequence length).
struct LayerContext {
  int64_t seq_len = 0;
  at::Tensor cos;   // [T, head_dim] RoPE (Llama family), compute dtype; undefined for OPT
  at::Tensor sin;   // [T, head_dim]
  at::Tensor mask;  // [T, T] additive causal mask (0 / -inf), float32
  /// The model's sliding window (0 = none) and its [T, T] windowed causal mask, undefined when none. Layers
  /// that use the window (checkpoint::LayerAttentionWindow) attend with this mask instead of `mask`.
  int64_t sliding_window = 0;
  at::Tensor sliding_mask;
  /// RoPE tables of the sliding-window layers where they differ from cos/sin (Gemma 3's rope_local_base_freq,
  /// unscaled); undefined otherwise, and those layers use cos/sin.
  at::Tensor local_cos;
  at::Tensor local_sin;
};

/// What the calibration forwards of a routed (MoE) block gave each of its experts (DecoderLayer::FinishCalibration).
struct ExpertCoverage {
  std::string block;                 // full name: "model.layers.3.block_sparse_moe"
  std::vector<std::string> experts;  // full names: "model.layers.3.block_sparse_moe.experts.0", ...
  std::vector<int64_t> routed;       // tokens the router sent to each expert
  std::vector<int64_t> topped_up;    // tokens each expert also ran on for statistics only (output discarded)
};

/// Where a layer keeps one of its linears: the module it is a child of and the member that holds it.
struct LinearSlot {
  torch::nn::Module* parent;
  std::shared_ptr<LinearLike>* member;
};

/// A linear of a layer with its names.
struct NamedLinear {
  std::string name;           // full HF name: "model.layers.0.self_attn.q_proj"
  std::string relative_name;  // "self_attn.q_proj"
  std::shared_ptr<LinearLike> linear;
};

class DecoderLayer : public torch::nn::Module {
 public:
  /// `prefix` is the layer's HF name with a trailing dot: "model.layers.3.".
  DecoderLayer(int64_t index, std::string prefix) : index_(index), prefix_(std::move(prefix)) {}

  /// hidden [B, T, hidden] in the compute dtype -> [B, T, hidden].
  virtual at::Tensor forward(const at::Tensor& hidden, const LayerContext& context) = 0;

  /// Calibration coverage of routed (MoE) layers; dense layers do nothing. From this call on, forwards count the
  /// tokens the router sends each expert and keep, per expert, the `min_expert_tokens` tokens that ranked it highest
  /// among those not routed to it (0 = count only).
  virtual void BeginCalibration(int64_t min_expert_tokens) { (void)min_expert_tokens; }
  /// Ends the recording: runs each expert that received fewer than the minimum on its best-ranked other tokens (for
  /// the statistics of whatever observes its linears; the output is discarded) and returns the counts, one entry per
  /// routed block (none for dense layers). May throw what the experts' linears throw (c10::Error, a GPTQ capture's
  /// stop); the recording has ended either way.
  virtual std::vector<ExpertCoverage> FinishCalibration() { return {}; }

  int64_t index() const { return index_; }
  const std::string& prefix() const { return prefix_; }

  /// Every linear in forward order (q, k, v, o, gate, up, down for Llama).
  std::vector<NamedLinear> NamedLinears() const;
  /// nullptr when `relative_name` is not a linear of this layer.
  std::shared_ptr<LinearLike> FindLinear(const std::string& relative_name) const;
  /// Swaps the linear `relative_name` ("self_attn.k_proj") for `replacement`; the next forward uses it.
  /// InvalidArgument when the name is unknown (the message lists the names) or the feature sizes differ.
  absl::Status ReplaceLinear(const std::string& relative_name, std::shared_ptr<LinearLike> replacement);

 protected:
  /// Registers `*slot` as child `child` of `parent` and records it as `relative_name`. The layer must outlive
  /// nothing here: `parent` and `slot` are members of this layer.
  void AddLinear(const std::string& relative_name, torch::nn::Module& parent, const std::string& child,
                 std::shared_ptr<LinearLike>* slot);
  /// AddLinear for each of `specs` (checkpoint::LayerLinears' order) with the slot at its index, as the child named by
  /// the part of its relative name after the last '.' ("self_attn.q_proj": "q_proj", "fc1": "fc1"). Both lists are
  /// one layer's (module_loader.h's LoadLinears filled the slots from the same specs).
  void AddLinears(const std::vector<checkpoint::LinearSpec>& specs, const std::vector<LinearSlot>& slots);

 private:
  struct Slot {
    std::string relative_name;
    torch::nn::Module* parent;
    std::string child;
    std::shared_ptr<LinearLike>* slot;
  };
  int64_t index_;
  std::string prefix_;
  std::vector<Slot> slots_;
};

}  // namespace quark::runtime
