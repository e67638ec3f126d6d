// #35: what training a rotation (SpinQuant's Cayley SGD, core/algorithms/learned_rotation.h) costs, from the model's
// shapes alone: the memory the trainer refuses to exceed (the entry's max_memory_bytes) and the arithmetic of its steps.
// Shared by the trainer, which checks the bound before it reads a weight, and by the job estimator (no LibTorch here).
#pragma once

#include <cstdint>

#include "core/checkpoint/model_config.h"

namespace quark::estimate {

/// The trainer holds the whole float32 model (decoder weights, embeddings, lm_head) and one step's graph over
/// `batch` windows of `seq_len` tokens: every decoder weight rotated and fake-quantized (both kept for the backward),
/// each layer's activations and attention scores, the logits and their gradient, and the rotations.
int64_t RotationTrainingBytes(const checkpoint::ModelConfig& model, int64_t seq_len, int64_t batch);

/// Floating-point operations of `steps` training steps over `batch` windows of `seq_len` tokens: per step every
/// decoder weight (and the lm_head) rotated by R1 (and the per-head R2), the forward over the windows (the linears,
/// attention's scores and values, the logits), the backward at twice the forward, and the Cayley update of each
/// rotation (a solve of its size).
double RotationTrainingFlops(const checkpoint::ModelConfig& model, int64_t seq_len, int64_t batch, int64_t steps,
                             bool trains_r2);

}  // namespace quark::estimate
