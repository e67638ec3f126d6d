// #35: weights whose spec names ObserverKind::kImatrixMse take their parameters from llm-compressor's imatrix-weighted
// MSE range search (core/numerics/imatrix_mse_observer.h) with their decoder layer's importance matrix: per linear,
// the sum over the calibration tokens of each input column's squared activation, seen on the layer's calibration
// inputs (the quantized previous layers' outputs) through the layer as the earlier algorithms left it (smoothed or
// rotated float weights). Only the parameters are fixed: the weights stay the float ones (RTN onto the chosen grid).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/config/layer_plan.h"
#include "core/numerics/imatrix_mse_observer.h"
#include "core/quantize/layer_quantizer.h"
#include "core/runtime/decoder_layer.h"
#include "core/runtime/transformer_model.h"

namespace quark::quantize {

/// Whether any quantized linear of `plan` has an imatrix_mse weight spec.
bool UsesImatrixMse(const LayerPlan& plan);

class ImatrixMsePass {
 public:
  explicit ImatrixMsePass(LayerPlan plan, ImatrixMseOptions options = {})
      : plan_(std::move(plan)), options_(options) {}

  /// The weight parameters (by full module name) of `layer`'s imatrix_mse linears, for LayerQuantizer::Calibrate's
  /// `known`; empty when the layer has none. `samples` ([1, T, hidden] each) run through the layer once with those
  /// linears observed. FAILED_PRECONDITION without samples; a weight spec the search cannot take (imatrix_mse_observer.h)
  /// is an INVALID_ARGUMENT naming the module's weight.
  absl::StatusOr<CalibratedParams> Run(runtime::DecoderLayer& layer, const std::vector<at::Tensor>& samples,
                                       runtime::TransformerModel& model) const;

  /// Each linear's importance of the last Run ([in] float64 sums of x² over its calibration rows), by module name:
  /// what the parameters were searched with (tests compare it with an independent computation).
  const std::map<std::string, at::Tensor>& last_importance() const { return last_importance_; }

 private:
  LayerPlan plan_;
  ImatrixMseOptions options_;
  mutable std::map<std::string, at::Tensor> last_importance_;
};

}  // namespace quark::quantize
