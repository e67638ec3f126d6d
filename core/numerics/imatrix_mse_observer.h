// llm-compressor's `imatrix_mse` weight observer (llmcompressor/observers/imatrix.py, IMatrixMSEObserver with its
// _grid_search): per output channel or per group, the range [p * min, p * max] for p = 1 - i / grid,
// i = 0 .. max(1, int(maxshrink * grid)), whose fake-quantized weight has the least importance-weighted error
// sum_j imp_j |w_j - q_j|^norm, with imp the mean squared activation of each input column normalised to mean 1;
// the search stops after `patience` steps that improve no channel. Defaults are llm-compressor's (grid 20,
// maxshrink 0.95, patience 5, norm 3). The parameters come from the engine's own qparams arithmetic (Quark's)
// for the chosen range, so the result drops into RTN or GPTQ wherever a MinMax observer's would.
#pragma once

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"
#include "core/numerics/observer.h"
#include "core/numerics/quant_params.h"

namespace quark {

struct ImatrixMseOptions {
  int grid = 20;
  double maxshrink = 0.95;
  int patience = 5;
  double norm = 3.0;
};

/// `weight` [N, K] float32 / bfloat16 / float16; `importance` [K] (sum or mean of x^2 per input column: only the
/// ratios matter), or undefined for plain (unweighted) MSE. `spec`: a static integer weight spec, per_channel on
/// axis 0 or per_group along axis 1 (K a multiple of group_size). INVALID_ARGUMENT naming the field otherwise or for
/// options out of range (grid > 0, maxshrink in [0, 1], patience >= 0, norm > 0), for an importance of the wrong
/// size or with negative or non-finite values.
absl::StatusOr<QuantParams> ImatrixMseParams(const at::Tensor& weight, const at::Tensor& importance,
                                             const QuantSpec& spec, const ImatrixMseOptions& options = {});

/// ObserverKind::kImatrixMse as an Observer: it keeps the one weight it is shown and computes ImatrixMseParams with
/// the importance given to it. A weight quantized without its layer's importance (no calibrated run: a standalone
/// fake-quantization, a GPTQ group) is a FAILED_PRECONDITION naming the observer, never a silent MinMax or plain MSE.
class ImatrixMseObserver : public Observer {
 public:
  explicit ImatrixMseObserver(const QuantSpec& spec) : spec_(spec) {}
  /// [K] importance of the input columns (imatrix_mse_pass.h collects it).
  void set_importance(at::Tensor importance) { importance_ = std::move(importance); }

  /// One weight [N, K]; a second batch is an INVALID_ARGUMENT (weights are observed once).
  absl::Status Observe(const at::Tensor& x) override;
  absl::StatusOr<QuantParams> ComputeParams() const override;
  /// The searched range: min and max of the computed parameters' grid ([N] or [N, G]).
  absl::StatusOr<std::pair<at::Tensor, at::Tensor>> Range() const override;

 private:
  QuantSpec spec_;
  at::Tensor weight_;
  at::Tensor importance_;
};

}  // namespace quark
