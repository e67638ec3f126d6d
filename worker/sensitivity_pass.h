// #36 item 3: an automatic search's sensitivity child on the worker (JobSpec.sensitivity_pass). One streamed pass
// of core/search's MeasureSensitivity for the child's one candidate (spec.preset) over the calibration samples:
// per linear group of every decoder layer, the mean KLD from the float model and the NLL increase when only that
// group is quantized. quarkd's search reads the figures from the result's metrics; sensitivity.json (the table as
// `quark sensitivity --output` writes it) is the published artifact.
#pragma once

#include "absl/status/statusor.h"
#include "worker/quantize_pipeline.h"

namespace quark::worker {

/// A split pass (#36 item 4: spec.sensitivity_layer_count > 0) measures only the groups of decoder layers
/// [spec.sensitivity_first_layer, + count), each exactly as the whole pass does (the float stream runs every layer).
/// Metrics: "kld:GROUP" and "nll_increase:GROUP" per group, sensitivity_float_nll, sensitivity_tokens,
/// seconds_sensitivity. Calibration: request.calibration_file with spec.calibration's num_samples (default 16),
/// seq_len (default 256) and seed. Computes on request.device in spec.resources.compute_dtype (float32 when unset), as
/// the job's quantization would. Errors: INVALID_ARGUMENT naming spec.preset (unknown, quantizes no weight) or
/// spec.calibration.uri (none fetched) or spec.resources.compute_dtype or spec.sensitivity_first_layer (a range
/// outside the model's layers); FAILED_PRECONDITION naming resources.gpus for a
/// device this process cannot use; the engine's errors as they are; CANCELLED when `cancel` fired before the pass
/// or during it (checked when it ends: one pass is not interrupted).
absl::StatusOr<PipelineResult> RunSensitivityPass(const PipelineRequest& request, ProgressSink& progress,
                                                  const CancelToken& cancel);

}  // namespace quark::worker
