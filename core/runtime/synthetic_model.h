// Synthetic models: a valid HF folder (config.json, safetensors, optional tokenizer.model) with seeded random
// weights in the shapes of real models, for size and speed tests where no real weights can be had.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/checkpoint/model_config.h"

namespace quark::runtime {

struct SyntheticModelOptions {
  std::string arch = "llama";  // "llama", "mistral" or "opt"
  std::string shape = "tiny";  // see SyntheticShapes()
  std::string dtype = "bf16";  // "f32", "bf16" or "f16"
  uint64_t seed = 0;
  std::string out_dir;
  /// A SentencePiece model copied as tokenizer.model (optional); its piece count must not exceed the vocab.
  std::string tokenizer_path;
  uint64_t max_shard_bytes = 5'000'000'000ull;
};

/// The shape names known for `arch` ("tiny", "llama-2-7b", "llama-2-13b", "llama-3-8b", "llama-3.1-8b",
/// "mistral-7b", "opt-125m", "opt-1.3b", "opt-6.7b", ...).
std::vector<std::string> SyntheticShapes(const std::string& arch);

/// The HF config of a named shape. InvalidArgument listing the known arches / shapes otherwise.
absl::StatusOr<checkpoint::ModelConfig> SyntheticConfig(const std::string& arch, const std::string& shape,
                                                        const std::string& dtype);

/// Writes the folder. Weights: linear and embedding weights ~ N(0, 0.02^2), norm weights 1, biases and norm
/// biases 0; tensor k drawn from a generator seeded with (seed, k), in row slices, so memory stays small and
/// the same options give the same bytes. Errors name the option or path.
absl::Status MakeSyntheticModel(const SyntheticModelOptions& options);

}  // namespace quark::runtime
