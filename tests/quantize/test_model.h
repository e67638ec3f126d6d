// Small synthetic Llama checkpoints for the quantize and export tests (GQA, random weights, written with the
// project's own CheckpointWriter), plus the fixture paths.
#pragma once

#include <cstdint>
#include <string>

#include "core/checkpoint/model_config.h"

namespace quark::testing {

struct SyntheticLlamaOptions {
  int64_t hidden = 64;
  int64_t intermediate = 128;
  int64_t layers = 2;
  int64_t heads = 4;
  int64_t kv_heads = 2;  // grouped-query attention
  int64_t vocab = 512;   // the stories260K tokenizer's vocabulary, so its tokenizer.model can be used
  uint64_t seed = 7;
  std::string torch_dtype = "float32";
};

/// Hidden 128 and intermediate 256: a group of 128 divides every linear's input dimension (uint4_wo_128, GPTQ g128).
inline SyntheticLlamaOptions Group128Llama(int64_t layers = 2) {
  SyntheticLlamaOptions options;
  options.hidden = 128;
  options.intermediate = 256;
  options.layers = layers;
  return options;
}

/// Writes config.json + model.safetensors (+ the stories260K tokenizer.model) into a fresh temporary folder and
/// returns its path. Aborts the test (gtest fatal failure) on I/O errors.
std::string WriteSyntheticLlama(const SyntheticLlamaOptions& options = {});

/// A fresh, empty temporary folder path (not created), in a folder of this process's that is removed when the process
/// exits (with files named "<path>.<extension>") unless QUARK_KEEP_TEST_FILES is set.
std::string TempPath(const std::string& stem);

/// The first `bytes` bytes of the TinyStories eval fixture in a temporary file (tokenizing the whole fixture
/// would dominate a test's time).
std::string SmallEvalText(size_t bytes = 6000);

/// $QUARK_SHARED_DIR/fixtures/<relative>.
std::string FixturePath(const std::string& relative);

}  // namespace quark::testing
