// A Llama checkpoint of a chosen shape with N(0, 0.02) bf16 weights (norms 1), written with the project's
// CheckpointWriter and no LibTorch, for the estimator's tests and quarkd's (which never link LibTorch).
#pragma once

#include <cstdint>
#include <string>

namespace quark::estimate::testing {

/// Writes config.json + model.safetensors into `dir` (created). Heads of 64. Aborts the test on I/O errors.
void WriteBf16Llama(const std::string& dir, int64_t hidden, int64_t intermediate, int64_t layers);

}  // namespace quark::estimate::testing
