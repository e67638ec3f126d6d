// The scaling pairs of SmoothQuant, AWQ and AutoSmoothQuant (Quark's `scaling_layers`) on one streamed decoder layer:
// finding the ops by their HF-relative names, moving a per-channel scale from a norm or a linear into the linears
// that read its output (the float function of the layer is unchanged), recording the inputs of the linears over the
// calibration samples, and running the module whose output a search compares.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"
#include "core/runtime/activation_home.h"
#include "core/runtime/decoder_layer.h"

namespace quark::algorithms {

/// Attention geometry: v_proj -> o_proj scales cross grouped KV heads.
struct HeadLayout {
  int64_t heads = 1;
  int64_t kv_heads = 1;
};

/// Runs the (float) layer on one sample [1, T, hidden] and returns its output.
using LayerRunner = std::function<at::Tensor(const at::Tensor& sample)>;
/// The runtime's context (RoPE tables, causal mask) for a sequence length.
using ContextFor = std::function<const runtime::LayerContext&(int64_t seq_len)>;

/// One resolved scaling pair, with the scale an algorithm chose for it.
struct ScalingResult {
  ScalingLayer pair;
  at::Tensor scales;    // [channels] in the weights' dtype
  double ratio = -1;    // the searched ratio (AWQ, AutoSmoothQuant); -1 for SmoothQuant
  int trial_batches = 0;  // AWQ: the batched forwards its grid took (search_batch.h); 0 = one ratio at a time
};

/// Checks that `pair` names ops of `layer`: prev_op a norm or a linear, `layers` linears that read prev_op's output,
/// `inp` one of them, module2inspect empty, a linear, "self_attn" or "mlp". prev_op "self_attn.qkv_proj" (Phi-3's
/// fused q | k | v) reads into exactly ["self_attn.o_proj"], whose input must fit its v rows. A pair in front of an
/// MoE block (moe_scaling.h) may also list the block's routers, must list every expert's gate and up, and takes the
/// block as inp and module2inspect. INVALID_ARGUMENT naming `path`'s field.
absl::Status CheckScalingPair(const runtime::DecoderLayer& layer, const ScalingLayer& pair, const std::string& path);

/// `pair` as the algorithms run it: a pair in front of an MoE block with the routers it leaves out added (they read
/// the same norm) and the block as inp / module2inspect where empty (CompleteMoePair); any other pair unchanged.
ScalingLayer ResolvedPair(const runtime::DecoderLayer& layer, const ScalingLayer& pair);

/// Divides prev_op's output channels by `scales` (norm weight and bias, or a linear's rows and bias) and multiplies
/// the input columns of `pair.layers` by them, as Quark's apply_scale; with grouped KV heads a v_proj -> o_proj
/// scale is reduced (max) over the query heads of each KV head first. Phi-3's fused self_attn.qkv_proj -> o_proj
/// divides only the v rows of qkv_proj (the last kv_heads * head_dim, reduced the same way). In front of an MoE
/// block the routers take the scale too, listed or not (ResolvedPair): routing never changes.
absl::Status ApplyScaling(runtime::DecoderLayer& layer, const ScalingLayer& pair, const at::Tensor& scales,
                          const HeadLayout& heads);

/// What ApplyScaling multiplies the readers' input columns by for `scales`: `scales` itself, or under grouped KV
/// heads (v_proj / qkv_proj -> o_proj) the max over each KV head's query heads, repeated per query head.
/// INVALID_ARGUMENT when prev_op's rows cannot take them.
absl::StatusOr<at::Tensor> ReaderScales(const runtime::DecoderLayer& layer, const ScalingLayer& pair,
                                        const at::Tensor& scales, const HeadLayout& heads);

/// The inputs of the layer's linears over the samples, recorded while the layer runs: per linear one [T, in] tensor
/// per sample (`keep_inputs`) and the running max |x| per input channel (float32).
struct LinearInputs {
  std::map<std::string, std::vector<at::Tensor>> inputs;
  std::map<std::string, at::Tensor> abs_max;
  /// What the forwards gave each expert of the layer's MoE block (none for dense layers).
  std::vector<runtime::ExpertCoverage> coverage;
  /// The recorded inputs of `name` as one [tokens, in] tensor.
  at::Tensor Concatenated(const std::string& name) const;
};

/// Runs `run` on every sample with the linears `names` recorded (a name may also be an MoE block, "mlp" /
/// "block_sparse_moe": its input, every token); `outputs` (if given) receives the layer's outputs.
/// Without `outputs` each forward stops once every named linear has seen its input (the rest is not computed).
/// An MoE layer's experts are covered as quantize/expert_coverage.h says: a short expert's linears also record its
/// best-ranked other tokens, up to `min_expert_tokens`; a named linear that saw no token at all is a
/// FAILED_PRECONDITION naming it. Kept inputs and outputs are where `activations` keeps activations (Hold).
absl::StatusOr<LinearInputs> RecordLinearInputs(runtime::DecoderLayer& layer, const std::vector<at::Tensor>& samples,
                                                const LayerRunner& run, const std::vector<std::string>& names,
                                                bool keep_inputs, std::vector<at::Tensor>* outputs,
                                                int64_t min_expert_tokens = 0,
                                                const runtime::ActivationHome& activations = {});

/// The output of `name` ("self_attn", "mlp", an MoE block or a linear's relative name) for its input x [1, T, in].
absl::StatusOr<at::Tensor> RunSubmodule(runtime::DecoderLayer& layer, const std::string& name, const at::Tensor& x,
                                        const runtime::LayerContext& context);

/// The layer's current norm, linear and MoE router tensors by relative HF name ("input_layernorm.weight",
/// "mlp.up_proj.weight", "self_attn.q_proj.bias", "mlp.gate.weight"): what an algorithm that edits the layer hands
/// to the export.
std::map<std::string, at::Tensor> LayerTensors(const runtime::DecoderLayer& layer);
/// The inverse of LayerTensors: puts each tensor (relative name, e.g. "input_layernorm.weight" or
/// "self_attn.q_proj.bias") into the layer's norm or float linear (a resumed run restores what the algorithms left).
/// INVALID_ARGUMENT naming a tensor the layer has no place for.
absl::Status SetLayerTensors(runtime::DecoderLayer& layer, const std::map<std::string, at::Tensor>& tensors);

/// The float weight of a linear of the layer; INVALID_ARGUMENT naming it when there is none.
absl::StatusOr<at::Tensor> LinearWeight(const runtime::DecoderLayer& layer, const std::string& relative_name);
/// Replaces a linear's weight (a FloatLinear's; INVALID_ARGUMENT for a linear that is already quantized).
absl::Status SetLinearWeight(runtime::DecoderLayer& layer, const std::string& relative_name, at::Tensor weight);

/// The weight of a reader of a scaled output: a float linear's, or an MoE router's (moe_scaling.h).
absl::StatusOr<at::Tensor> ReaderWeight(const runtime::DecoderLayer& layer, const std::string& relative_name);
absl::Status SetReaderWeight(runtime::DecoderLayer& layer, const std::string& relative_name, at::Tensor weight);

}  // namespace quark::algorithms
