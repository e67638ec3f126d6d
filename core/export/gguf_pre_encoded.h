// GGUF tensor data an algorithm encoded itself (K-quant-aware GPTQ, core/algorithms/gptq_kquant.h): the writer
// writes these bytes instead of quantizing the tensor's float values, after checking that they decode to exactly
// those values (re-running ggml's search on them could pick another grid). The writer publishes its per-tensor type
// plan here at Create, so the algorithm encodes each tensor in the type the file will hold. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/export/gguf_blocks.h"

namespace quark::exporter::gguf {

struct PreEncodedTensor {
  GgmlType type = GgmlType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  /// `rows` rows of RowBytes(type, cols) bytes, in the HF tensor's row order (the writer applies llama.cpp's Q/K row
  /// permutation itself).
  std::vector<uint8_t> bytes;
};

class PreEncodedTensors {
 public:
  /// The writer's plan: HF tensor name -> its GGUF type (whole tensors only; MoE experts' slices are not listed).
  void SetPlannedTypes(std::map<std::string, GgmlType> types);
  /// The planned type of `hf_name`, or nullopt when the plan has none (no writer yet, or not a whole 2-D tensor).
  std::optional<GgmlType> PlannedType(const std::string& hf_name) const;

  void Put(const std::string& hf_name, PreEncodedTensor tensor);
  /// Removes and returns the data of `hf_name`, if any was put.
  std::optional<PreEncodedTensor> Take(const std::string& hf_name);

 private:
  mutable std::mutex mu_;
  std::map<std::string, GgmlType> planned_;       // guarded by mu_
  std::map<std::string, PreEncodedTensor> data_;  // guarded by mu_
};

}  // namespace quark::exporter::gguf
