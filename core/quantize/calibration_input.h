// The calibration samples of a quantization run (via runtime::LoadCalibrationSet): random windows of a text file, or
// the lines of a JSONL ("text") or token-id file as given, in order. Synthetic ids are for tests and benchmarks only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/checkpoint/model_config.h"
#include "core/runtime/tokenizer.h"

namespace quark::quantize {

/// Built-in synthetic calibration: `num_samples` samples of `seq_len` tokens, each [1, seq_len] int64. Token 0 of
/// every sample is the model's BOS (when it has one); every other token is `r % vocab_size` for successive outputs
/// r of std::mt19937_64(seed), sample after sample: the same seed gives the same ids on every machine.
std::vector<at::Tensor> SyntheticCalibrationSamples(const checkpoint::ModelConfig& model, int64_t num_samples,
                                                    int64_t seq_len, uint64_t seed);

/// Samples from `path`. `seq_len` is capped at max_position_embeddings. `tokenizer` may be null for token-id files.
/// INVALID_ARGUMENT for an empty path or non-positive counts; file errors name the file.
absl::StatusOr<std::vector<at::Tensor>> LoadCalibrationSamples(const std::string& path, const checkpoint::ModelConfig& model,
                                                               const runtime::Tokenizer* tokenizer, int64_t num_samples,
                                                               int64_t seq_len, uint64_t seed);

}  // namespace quark::quantize
