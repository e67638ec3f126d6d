// AutoRound / SignRound (Cheng et al., 2023; Intel auto-round, auto_round/algorithms/quantization/sign_round/
// quantizer.py quantize_block) on one decoder layer of the LayerStreamer:
//
//   targets  y_i = the float layer on sample i (no grad), every sample kept in the compute dtype where the
//            activations are kept (on the host when they do not fit the device: runtime::ActivationHome)
//   tuned    per quantized linear: V (rounding offsets) and the min / max clipping factors (autoround_qdq.h), the
//            linears swapped for trainable fake-quantized ones
//   iters    a batch of batch_size * gradient_accumulate_steps samples (a shuffled cycle, reshuffled when fewer are
//            left, as auto-round's IndexSampler); loss = mean squared error of the layer's output over the batch's
//            elements; signed step p -= lr_i * sign(dL/dp) with lr_i = lr * (1 - i / iters) (torch's LinearLR from 1
//            to 0, auto-round's default), the clipping factors clamped to [0, 1]
//   best     the values of the iteration with the lowest loss (taken before its step), unless not_use_best_mse
//   finish   the engine's parameters of the clipped ranges, the weights on their grid (FinishAutoRound)
//
// Gradients of a sample are computed one sample at a time and summed (the sign of the sum is the batch's), so a
// batch costs one sample's activations. The loss is computed in float32; its per-sample sums are added on the layer's
// device in float64 and read once an iteration (the value on_iteration reports and the best iteration is chosen by).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"
#include "core/numerics/quant_params.h"
#include "core/runtime/activation_home.h"
#include "core/runtime/decoder_layer.h"

namespace quark::algorithms {

/// Resolved (auto-round's None learning rates filled in).
struct AutoRoundOptions {
  int iters = 200;
  double lr = 1.0 / 200;         // auto-round: 1 / iters
  double minmax_lr = 1.0 / 200;  // auto-round: lr
  int batch_size = 8;
  int gradient_accumulate_steps = 1;
  bool enable_minmax_tuning = true;
  bool not_use_best_mse = false;
  uint32_t seed = 42;
};

/// The options of an algo_config entry, with auto-round's defaults for the unset learning rates.
AutoRoundOptions ResolveAutoRoundOptions(const AutoRoundAlgo& algo);

/// A linear of the layer that AutoRound rounds.
struct AutoRoundTarget {
  std::string relative_name;  // "self_attn.k_proj"
  QuantSpec spec;             // integer weight spec, per_group or per_channel (AutoRoundWeightProblem)
};

struct AutoRoundLayerResult {
  std::map<std::string, QuantParams> params;  // weight parameters by full module name
  double first_loss = 0;  // iteration 0's loss: V = 0 and the full ranges (round to nearest on the min-max grid)
  double best_loss = 0;   // the loss of the kept values (the last iteration's with not_use_best_mse)
  int best_iter = 0;
  /// Rounding choices of the kept values that differ from round to nearest (round(w / s + v) != round(w / s)), over
  /// all target weights; and the number of weights.
  int64_t changed_roundings = 0;
  int64_t weights = 0;
};

/// `forward` runs the layer as it is on one sample ([B, T, hidden] -> [B, T, hidden]).
using BlockForward = std::function<at::Tensor(const at::Tensor& sample)>;

struct AutoRoundCallbacks {
  std::function<bool()> cancelled;                         // checked every iteration: true stops with CANCELLED
  std::function<void(int iter, double loss)> on_iteration;  // after each iteration's loss
};

/// Tunes and rounds `targets` of `layer` together: each FloatLinear's weight becomes its rounded weight (values on
/// the grid of the returned parameters). Errors name the module; INVALID_ARGUMENT for bad options, no samples, a
/// target that is not a FloatLinear or a spec AutoRound cannot run.
absl::StatusOr<AutoRoundLayerResult> AutoRoundQuantizeLayer(runtime::DecoderLayer& layer,
                                                            const std::vector<at::Tensor>& samples,
                                                            const BlockForward& forward,
                                                            const std::vector<AutoRoundTarget>& targets,
                                                            const AutoRoundOptions& options,
                                                            const AutoRoundCallbacks& callbacks = {},
                                                            const runtime::ActivationHome& activations = {});

}  // namespace quark::algorithms
