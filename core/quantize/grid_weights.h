// A checkpointed layer's weights that lie exactly on their quantization grid (GPTQ's), kept as codes instead of
// float32: a 7B layer's GPTQ weights are 0.82 GB as float32 and a quarter of that as one-byte codes, which decides
// whether a 32-layer job's checkpoint fits on a worker's disk.
#pragma once

#include <optional>

#include <ATen/ATen.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/config/layer_plan.h"
#include "core/numerics/quant_params.h"
#include "core/numerics/real_quant.h"
#include "core/quantize/layer_checkpoint.h"

namespace quark::quantize {

/// `weight`'s codes under `spec` and `params` when Dequantize(QuantizeReal(weight)) gives it back bit for bit (a
/// weight on its grid, as GPTQ leaves it); nullopt for MX blocks, a non-float dtype or a weight off the grid.
absl::StatusOr<std::optional<RealQuantized>> ExactGridCodes(const at::Tensor& weight, const QuantSpec& spec,
                                                            const QuantParams& params);

/// Moves every `data.tensors` entry "<module>.weight" whose module has a weight spec in `plan` and known weight
/// parameters in `data.params`, and which Dequantize(QuantizeReal(w)) reproduces bit for bit, into
/// `data.grid_weights`. Anything else (MX blocks, weights off the grid such as AWQ's scaled ones) stays float.
absl::Status CompactGridWeights(const LayerPlan& plan, LayerCheckpointData& data);

/// The inverse: each `data.grid_weights` entry back into `data.tensors` in its recorded dtype. DATA_LOSS naming the
/// tensor when the plan no longer quantizes its module (the checkpoint belongs to another config).
absl::Status ExpandGridWeights(const LayerPlan& plan, LayerCheckpointData& data);

}  // namespace quark::quantize
