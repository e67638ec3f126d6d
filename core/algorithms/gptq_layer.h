// GPTQ over one decoder layer of the LayerStreamer, in Quark's sequential order: the modules of each
// inside_layer_modules entry are quantized on the Hessian of their input as the layer computes it with the modules of
// earlier entries already quantized. One Hessian serves every module that reads the same input (q/k/v, gate/up):
// exact, since a module's input never depends on modules that read the same or a later input. A capture pass runs
// the layer only up to the module whose input it needs.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/algorithms/gptq.h"
#include "core/config/quant_spec.h"
#include "core/numerics/quant_params.h"
#include "core/runtime/activation_home.h"
#include "core/runtime/decoder_layer.h"

namespace quark::algorithms {

/// A linear of the layer that GPTQ quantizes.
struct GptqTarget {
  std::string relative_name;  // "self_attn.k_proj"
  std::string input;          // checkpoint::LinearSpec::input
  QuantSpec spec;             // the weight spec the numerics run (with the export's scale dtype)
  /// An MoE expert's linear (checkpoint::LinearSpec::routed): its capture runs whole forwards (a sample may not reach
  /// it), then the layer's calibration top-up (DecoderLayer::FinishCalibration) so a short expert gets tokens too.
  bool routed = false;
  /// NVFP4: GptqOptions::nvfp4_global_amax for this module (its fused shards' largest float amax); 0: its own.
  float nvfp4_global_amax = 0;
  /// #37 item 4: replaces GptqQuantizeWeight for this module (K-quant-aware GPTQ, gptq_kquant.h): the quantized weight
  /// from the weight, GPTQ's factor of its input and that input's Hessian diagonal [K] (2/n Σ x², before damping).
  /// `spec` is unused then and the module has no entry in GptqQuantizeLayer's parameters.
  std::function<absl::StatusOr<at::Tensor>(const at::Tensor& weight, const GptqFactor& factor,
                                           const at::Tensor& hessian_diagonal)>
      quantize;
};

/// The layer's work: `steps` in inside_layer_modules order (one entry's matched modules each); `input_order` the
/// inputs in forward order.
struct GptqLayerPlan {
  std::vector<std::vector<GptqTarget>> steps;
  std::vector<std::string> input_order;
  /// MoE calibration coverage for routed targets: tokens each expert sees at least (0 = no top-up).
  int64_t min_expert_tokens = 0;
};

/// The quantized modules (`done`: module -> the input it reads) upstream of `input`: those reading an input before it
/// in the plan's forward order. Statistics collected from `input` stay valid while this set does not change (a module
/// never changes its own input or an earlier one), for GPTQ's Hessians and GPTAQ / Qronos's paired statistics alike.
std::set<std::string> QuantizedUpstreamOf(const GptqLayerPlan& plan, const std::map<std::string, std::string>& done,
                                          const std::string& input);

/// The inputs that the plan's steps from `step` on read: statistics of any other input have no further use.
std::set<std::string> InputsReadFrom(const GptqLayerPlan& plan, size_t step);

struct GptqLayerCallbacks {
  /// Before each module: its full name and its index among the layer's targets.
  std::function<void(const std::string& module, int index, int total)> on_module;
  /// Checked between modules: true stops with CANCELLED.
  std::function<bool()> cancelled;
  /// After each routed capture: the MoE counts of that pass (routed and topped-up tokens per expert).
  std::function<void(const std::vector<runtime::ExpertCoverage>&)> on_coverage;
  /// Experts streamed in groups (runtime::StreamedLinear, #32 item 5): keeps a routed linear's GPTQ weight (full tensor
  /// name "...experts.3.up_proj.weight") where the streamer reads it when the expert loads again, with its spec and
  /// parameters (null for a target with its own quantizer). Without it, GPTQ of a streamed expert fails naming it.
  std::function<absl::Status(const std::string& tensor, const at::Tensor& weight, const QuantSpec* spec,
                             const QuantParams* params)>
      keep_streamed_weight;
};

/// Runs the layer on one sample [1, T, hidden] (the caller supplies the model's context).
using LayerForward = std::function<void(const at::Tensor& sample)>;

/// Quantizes the plan's modules of `layer` in place: each FloatLinear's weight becomes its GPTQ result (values on the
/// grid of the returned parameters). Returns the weight parameters by full module name. Errors name the module.
/// Routed experts streamed in groups are quantized expert by expert, a group at a time, with the same results
/// (GptqLayerCallbacks::keep_streamed_weight keeps their weights); what that path records per token (the routed
/// block's inputs, a group's calls to its experts) is kept where `activations` keeps the layer's activations, in host
/// memory when they do not fit the device (#27), and crosses to the device one call at a time.
absl::StatusOr<std::map<std::string, QuantParams>> GptqQuantizeLayer(runtime::DecoderLayer& layer,
                                                                     const std::vector<at::Tensor>& samples,
                                                                     const LayerForward& forward,
                                                                     const GptqLayerPlan& plan,
                                                                     const GptqOptions& options,
                                                                     const GptqLayerCallbacks& callbacks = {},
                                                                     const runtime::ActivationHome& activations = {});

}  // namespace quark::algorithms
