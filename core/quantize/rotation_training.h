// #35 item 4: a trainable `rotation` algo_config entry (Quark's trainable=True) in the pipeline. SpinQuant's R1 (and
// R2 when the entry applies R2) trained by Cayley SGD (core/algorithms/learned_rotation.h) on the job's calibration
// windows, before the rotated model is built; the trained rotations then fold through RotatedWeightSource exactly like
// the Hadamard one, so every export takes them unchanged.
//
// Resume: the training is retrained, not stored. It is deterministic for the same inputs (the entry's seed orders
// the windows and SGDG's QR draws; the calibration windows come from the job's seed; the checkpoint fingerprint
// holds the config, the calibration text's digest and the thread count), so a resumed run folds the same rotation
// into the layers it still quantizes as the run it resumes folded into the restored ones.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/algorithms/learned_rotation.h"
#include "core/algorithms/rotation.h"
#include "core/checkpoint/model_config.h"
#include "core/config/layer_plan.h"
#include "core/config/quant_spec.h"
#include "core/runtime/weight_source.h"

namespace quark::quantize {

/// What a trainable entry needs once the calibration windows are read: made by PrepareRotationTraining before any
/// weight is read.
struct RotationTraining {
  RotationAlgo entry;
  algorithms::RotationOptions init;  // the Hadamard (or random Hadamard) start, and whether R2 applies
  algorithms::RotationTrainingScheme scheme;
  std::shared_ptr<const runtime::WeightSource> weights;  // the float checkpoint
  checkpoint::ModelConfig model;
  std::string path;  // "algo_config[0]"
};

/// The scheme the trainer simulates: the weight and input specs of every decoder layer's q/k/v/o and gate/up/down
/// (the linears the trainer quantizes). UNIMPLEMENTED naming `path` and the two modules when they differ (the trainer
/// simulates one scheme for all of them; an excluded one differs from a quantized one); INVALID_ARGUMENT naming `path`
/// when none has a quantized weight (there is nothing to train for).
absl::StatusOr<algorithms::RotationTrainingScheme> RotationTrainingSchemeFor(const LayerPlan& plan,
                                                                             const checkpoint::ModelConfig& model,
                                                                             const std::string& path);

/// The R1 (and per-layer R2) to fold: `training.init` with the trained rotations in it. Refuses a model above the
/// entry's max_memory_bytes (or of another layout than the trainer's) before reading a weight, and calibration
/// windows of differing lengths, naming training.path. `progress` sees each step.
absl::StatusOr<algorithms::RotationOptions> TrainEntryRotation(
    const RotationTraining& training, const std::vector<at::Tensor>& samples,
    const std::function<void(const algorithms::RotationTrainingStep&)>& progress, algorithms::LearnedRotation* result);

}  // namespace quark::quantize
