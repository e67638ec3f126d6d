#include "core/export/gguf_pre_encoded.h"

#include <utility>

namespace quark::exporter::gguf {

void PreEncodedTensors::SetPlannedTypes(std::map<std::string, GgmlType> types) {
  std::lock_guard<std::mutex> lock(mu_);
  planned_ = std::move(types);
}

std::optional<GgmlType> PreEncodedTensors::PlannedType(const std::string& hf_name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = planned_.find(hf_name);
  if (it == planned_.end()) return std::nullopt;
  return it->second;
}

void PreEncodedTensors::Put(const std::string& hf_name, PreEncodedTensor tensor) {
  std::lock_guard<std::mutex> lock(mu_);
  data_[hf_name] = std::move(tensor);
}

std::optional<PreEncodedTensor> PreEncodedTensors::Take(const std::string& hf_name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = data_.find(hf_name);
  if (it == data_.end()) return std::nullopt;
  PreEncodedTensor tensor = std::move(it->second);
  data_.erase(it);
  return tensor;
}

}  // namespace quark::exporter::gguf
