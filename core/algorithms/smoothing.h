// Quark's pre-quantization scaling algorithms on one streamed decoder layer (amd/Quark quark/torch/algorithm/awq/:
// smooth.py, auto_smooth.py, awq.py, scale.py). Each takes the layer's float inputs (the float model's hidden states,
// as Quark's processors cache them), records what it needs while the float layer runs (its outputs are the next
// layer's float inputs), chooses one scale per scaling pair and moves it into the weights, so the float function of
// the layer is unchanged and its quantization error smaller.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/algorithms/layer_scaling.h"
#include "core/algorithms/search_batch.h"
#include "core/checkpoint/token_pass_memory.h"
#include "core/config/quant_spec.h"
#include "core/runtime/activation_home.h"
#include "core/runtime/decoder_layer.h"

namespace quark::algorithms {

/// How a linear of the layer is quantized afterwards (what the searches simulate).
struct LinearQuantSpecs {
  std::optional<QuantSpec> weight;
  std::optional<QuantSpec> input;
  /// If set, AWQ simulates the weight with this instead of `weight`'s fake quantization; `weight` (still required)
  /// then gives only the clip search's groups.
  WeightQdq weight_qdq;
};
using LayerQuantSpecs = std::map<std::string, LinearQuantSpecs>;  // by relative name

/// The layer's float work: its inputs, a runner for the float layer, contexts for submodules.
struct ScalingInputs {
  const std::vector<at::Tensor>* samples = nullptr;  // [1, T, hidden] each
  LayerRunner run;
  ContextFor context;
  HeadLayout heads;
  /// MoE calibration coverage of the recorded expert inputs (RecordLinearInputs).
  int64_t min_expert_tokens = 0;
  /// If set, receives the per-expert token counts of the recording pass that also gives the layer's outputs (the
  /// pass over the float layer; none for dense layers).
  std::vector<runtime::ExpertCoverage>* coverage = nullptr;
  /// Where the layer's activations are kept (the model's ActivationHome): `run` places its sample and Holds its
  /// output; the recorded linear inputs are kept there too and placed on the layer's device where they compute.
  runtime::ActivationHome activations;
};

struct SmoothQuantOptions {
  float alpha = 1.0f;
  float scale_clamp_min = 1e-3f;
};

/// SmoothQuant: s = clamp(act^alpha / w^(1 - alpha), min = scale_clamp_min), act = max |x| at each pair's first
/// linear over the samples (in front of an MoE block: at the block's input), w = max over the pair's linears (not
/// the routers) of max |W[:, c]| (>= 1e-5). `outputs` receives the float
/// layer's outputs (computed before any scale is applied, as Quark does).
absl::StatusOr<std::vector<ScalingResult>> SmoothQuantLayer(runtime::DecoderLayer& layer, const ScalingInputs& in,
                                                            const std::vector<ScalingLayer>& pairs,
                                                            const SmoothQuantOptions& options,
                                                            std::vector<at::Tensor>* outputs);

/// AutoSmoothQuant: per pair, ratio r = i/10 (i = 0..9), s = clamp(x_max^r, 1e-4) / sqrt(max(s) min(s)) with x_max =
/// max |x|; the loss compares module2inspect's float output with its output for Q(W s) and the quantized input
/// Q(x / s), as `loss` ("MSE", "MAE" or "RMSE": mean |d|^2, |d|, |d|^0.5).
absl::StatusOr<std::vector<ScalingResult>> AutoSmoothQuantLayer(runtime::DecoderLayer& layer, const ScalingInputs& in,
                                                                const std::vector<ScalingLayer>& pairs,
                                                                const LayerQuantSpecs& specs, const std::string& loss,
                                                                std::vector<at::Tensor>* outputs);

struct AwqOptions {
  int grid_size = 20;
  int clip_grid = checkpoint::kAwqClipGrid;
  double max_shrink = checkpoint::kAwqMaxShrink;
  int clip_tokens = static_cast<int>(checkpoint::kAwqClipTokens);
  /// Device bytes the searches may use to evaluate several trials at once (search_batch.h): ratios of the grid in
  /// one forward of the inspected module, shrink factors of the clip search in one product. 0: one trial at a
  /// time (Quark's loop).
  int64_t search_batch_bytes = 0;
};

/// AWQ: per pair, ratio r = i/grid (x_max = mean |x|), loss = MSE of module2inspect's output with Q(W s) / s; the
/// scales are applied, then the clip search (not for q/k projections): per output channel and weight group the
/// max |W| shrunk by i/20 (i < max_shrink * 20) with the lowest output MSE on sampled tokens; weights clamped to it.
/// With `search_batch_bytes` the ratios of a pair whose module BatchesTrials run in batches of TrialsPerBatch
/// (GridTrialBytes each): the module runs once per sample for the batch, its input expanded over the trials and the
/// pair's linears StackedTrialLinears. The first lowest loss wins either way.
/// `clips` (if given) receives the clip values per linear ([out, groups]).
absl::StatusOr<std::vector<ScalingResult>> AwqLayer(runtime::DecoderLayer& layer, const ScalingInputs& in,
                                                    const std::vector<ScalingLayer>& pairs,
                                                    const LayerQuantSpecs& specs, const AwqOptions& options,
                                                    std::vector<at::Tensor>* outputs,
                                                    std::map<std::string, at::Tensor>* clips = nullptr);

/// The clip search of AWQ for one weight [out, in] and its recorded input [tokens, in] (exposed for tests and the
/// benchmark): the best max |W| per (output channel, group), [out, groups]. `qdq`, if set, quantizes the clamped
/// weight instead of `spec` (which then gives only the groups). With `search_batch_bytes` the shrink factors of a
/// block of output channels run in batches of TrialsPerBatch (ClipShrinkBytes each): one clamp, one quantization
/// where it is RowLocalQuantization (else one per factor), one product and one error for the batch.
absl::StatusOr<at::Tensor> AwqBestClip(const at::Tensor& weight, const at::Tensor& input, const QuantSpec& spec,
                                       const AwqOptions& options, const WeightQdq& qdq = {});

}  // namespace quark::algorithms
