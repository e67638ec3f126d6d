// Learned rotation (#35 item 4): SpinQuant's R1 trained by Cayley SGD on the quantized network's next-token loss,
// as AMD Quark runs it for RotationConfig(trainable=True) (examples' rotation training script: RotationTrainer with
// loss_type "origin", SGDG(stiefel=True), HF Trainer's cosine schedule).
//
// The loss: the causal-LM cross-entropy of the model with R1 (initialised from the Hadamard rotation of
// rotation.h) folded exactly as RotatedWeightSource folds it, every decoder linear's weight fake-quantized by the
// engine's own quantizer for the scheme (scale from the weight each step, as SpinQuant's WeightQuantizer.find_params
// on weight.data) and, when the scheme quantizes inputs, the linears' inputs fake-quantized dynamically (Quark's
// script sets input_tensors.is_dynamic for the training); rounding passes gradients straight through. The rotations
// are the only trainable tensors: R1, and with train_r2 one R2 per layer (SpinQuant's pair); without it R2 stays the
// fixed Hadamard rotation of rotation.h. lm_head stays float (the presets exclude it; SpinQuant never quantizes it).
//
// Memory: SpinQuant trains end to end (a gradient through every layer), so it cannot stream one layer at a time like
// the other passes. The trainer holds the float model once (float32, norms folded) plus one step's autograd graph
// over train_batch_size windows; estimate::RotationTrainingBytes gives that figure and training above
// max_memory_bytes is refused naming the field, before any weight is read. The tiny models fit; a 7B model would
// need a device and activation checkpointing, which this trainer does not do.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/algorithms/rotation.h"
#include "core/checkpoint/model_config.h"
#include "core/config/quant_spec.h"
#include "core/runtime/weight_source.h"

namespace quark::algorithms {

/// Quark's rotation training arguments and defaults (its script's --learning_rate 1.5, --max_steps 100,
/// --train_batch_size 1), which are SpinQuant's (10_optimize_rotation.sh: --learning_rate 1.5 --max_steps 100).
struct LearnedRotationOptions {
  double learning_rate = 1.5;    // (0, 10]: SGDG's step is min(lr, 1 / ||W||_1), so lr caps the step
  int64_t max_steps = 100;       // [1, 100000]
  int64_t train_batch_size = 1;  // windows per step, [1, 4096]
  uint64_t seed = 0;             // the order of the windows and SGDG's QR draws
  /// Also train one R2 per layer (from init's R2), as SpinQuant does; off: R2 stays init's fixed rotation. Needs
  /// init.r2.
  bool train_r2 = false;
  /// The held model plus one step's graph (estimate::RotationTrainingBytes, checked to bound the measured peak) must
  /// fit: 8 GiB by default.
  int64_t max_memory_bytes = int64_t{8} << 30;
};

/// INVALID_ARGUMENT naming `path`.field (e.g. "algo_config[0].learning_rate") for a value out of the ranges above.
absl::Status ValidateLearnedRotationOptions(const LearnedRotationOptions& options, const std::string& path);

/// The options of a trainable `rotation` algo_config entry: its training arguments, and R2 trained when the entry
/// applies R2 (Quark's trainable=True makes every rotation it inserts trainable).
LearnedRotationOptions LearnedRotationOptionsFor(const RotationAlgo& entry);

/// The scheme the training simulates: the weight and input specs of the decoder linears.
struct RotationTrainingScheme {
  std::optional<QuantSpec> weight;
  std::optional<QuantSpec> input;  // made dynamic for the training, as Quark's script does
};

/// The model to train a rotation for, held once in float32 with the RMSNorm weights folded into the linears that
/// read them (R2, when init.r2, folded too). Llama-family layouts with separate q/k/v/o and gate/up/down, no biases,
/// no q/k norms, no sliding window, no experts; the others are refused naming the model_type.
class RotationTrainingModel {
 public:
  /// Errors: UNIMPLEMENTED naming `path` and the model_type for a layout above; INVALID_ARGUMENT naming
  /// `path`.max_memory_bytes when the estimate for (seq_len, options.train_batch_size) exceeds it; a weight's read
  /// error as is.
  static absl::StatusOr<std::unique_ptr<RotationTrainingModel>> Load(const runtime::WeightSource& weights,
                                                                     const checkpoint::ModelConfig& model,
                                                                     const RotationOptions& init, int64_t seq_len,
                                                                     const LearnedRotationOptions& options,
                                                                     const std::string& path);
  ~RotationTrainingModel();

  /// Mean next-token cross-entropy (nats) of the quantized network with rotation r1 ([hidden, hidden]) over `ids`
  /// ([B, T] int64). Differentiable in r1 (and r2) when they require grad. `r2`: one [head_dim, head_dim] rotation
  /// per layer when the model was loaded with options.train_r2, else empty (R2 is then folded in already).
  /// Throws c10::Error on a LibTorch failure.
  at::Tensor Loss(const at::Tensor& ids, const at::Tensor& r1, const RotationTrainingScheme& scheme,
                  const std::vector<at::Tensor>& r2 = {}) const;

  const checkpoint::ModelConfig& model() const;
  /// Whether R2 was left out of the held weights (options.train_r2 at Load): Loss then takes it per layer.
  bool trains_r2() const;

 private:
  struct Weights;
  explicit RotationTrainingModel(std::unique_ptr<Weights> weights);
  std::unique_ptr<Weights> weights_;
};

struct RotationTrainingStep {
  int64_t step = 0;  // 1-based
  double loss = 0;   // this step's batch loss before the update
  double lr = 0;
};

struct LearnedRotation {
  at::Tensor r1;  // [hidden, hidden] float64, orthonormal
  std::vector<at::Tensor> r2;  // with options.train_r2: one [head_dim, head_dim] float64 per layer
  std::vector<RotationTrainingStep> steps;
  double seconds = 0;
};

/// Trains R1 from init's rotation (rotation.h's RotationFor: the Hadamard matrix, or Quark's random Hadamard with
/// init.random) for options.max_steps steps on `samples` (each [1, T] int64, T equal for all; windows taken
/// train_batch_size at a time in a seeded order, cycling). The learning rate follows HF Trainer's cosine schedule
/// without warm-up: lr * 0.5 * (1 + cos(pi * k / max_steps)) at step k = 0, 1, ...
/// Errors: ValidateLearnedRotationOptions's, INVALID_ARGUMENT naming `path` when there are no samples or their
/// lengths differ, RotationFor's, and LibTorch failures as INTERNAL naming `path`.
absl::StatusOr<LearnedRotation> TrainRotation(const RotationTrainingModel& model, const RotationOptions& init,
                                              const std::vector<at::Tensor>& samples,
                                              const RotationTrainingScheme& scheme,
                                              const LearnedRotationOptions& options, const std::string& path,
                                              const std::function<void(const RotationTrainingStep&)>& progress = {});

}  // namespace quark::algorithms
