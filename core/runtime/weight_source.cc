#include "core/runtime/weight_source.h"

#include "core/base/strings.h"
#include "core/checkpoint/model_modules.h"
#include "core/runtime/tensor_view.h"

namespace quark::runtime {

absl::StatusOr<at::Tensor> CheckpointWeightSource::Get(const std::string& name, at::ScalarType dtype) const {
  const std::string stored = checkpoint::ResolveTensorName(*reader_, name);
  if (stored.empty()) return absl::NotFoundError(StrCat("tensor \"", name, "\" not found in ", reader_->location()));
  auto ref = reader_->Get(stored);
  if (!ref.ok()) return ref.status();
  return LoadAs(*ref, dtype);
}

absl::StatusOr<at::Tensor> CheckpointWeightSource::GetStored(const std::string& name) const {
  const std::string stored = checkpoint::ResolveTensorName(*reader_, name);
  if (stored.empty()) return absl::NotFoundError(StrCat("tensor \"", name, "\" not found in ", reader_->location()));
  auto ref = reader_->Get(stored);
  if (!ref.ok()) return ref.status();
  const checkpoint::StDType dtype = ref->info->dtype;
  if (dtype == checkpoint::StDType::kF32 || dtype == checkpoint::StDType::kF16 || dtype == checkpoint::StDType::kBF16) {
    return ViewTensor(*ref);
  }
  return LoadAs(*ref, at::kFloat);
}

bool CheckpointWeightSource::Has(const std::string& name) const {
  return !checkpoint::ResolveTensorName(*reader_, name).empty();
}

void CheckpointWeightSource::Prefetch(const std::string& prefix) const {
  // Older OPT checkpoints store names without "model.".
  const std::string short_prefix = prefix.rfind("model.", 0) == 0 ? prefix.substr(6) : prefix;
  for (const auto& file : reader_->files()) {
    for (const auto& info : file->header().tensors) {
      if (info.name.rfind(prefix, 0) == 0 || info.name.rfind(short_prefix, 0) == 0) {
        file->mapping()->WillNeed(file->FileOffset(info), info.NumBytes());
      }
    }
  }
}

absl::StatusOr<at::Tensor> TensorMapWeightSource::Get(const std::string& name, at::ScalarType dtype) const {
  auto stored = GetStored(name);
  if (!stored.ok()) return stored.status();
  return stored->to(dtype);
}

absl::StatusOr<at::Tensor> TensorMapWeightSource::GetStored(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return absl::NotFoundError(StrCat("tensor \"", name, "\" not found in memory"));
  return it->second;
}

}  // namespace quark::runtime
