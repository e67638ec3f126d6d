#include "core/runtime/tensor_view.h"

#include <cstdint>
#include <cstring>
#include <memory>

#include "core/base/strings.h"

namespace quark::runtime {

using checkpoint::StDType;

absl::StatusOr<at::ScalarType> AtenTypeOf(StDType dtype) {
  switch (dtype) {
    case StDType::kBool: return at::kBool;
    case StDType::kU8: return at::kByte;
    case StDType::kI8: return at::kChar;
    case StDType::kF8E4M3:
    case StDType::kF8E5M2:
    case StDType::kF8E8M0: return at::kByte;
    case StDType::kI16: return at::kShort;
    case StDType::kF16: return at::kHalf;
    case StDType::kBF16: return at::kBFloat16;
    case StDType::kI32: return at::kInt;
    case StDType::kF32: return at::kFloat;
    case StDType::kI64: return at::kLong;
    case StDType::kF64: return at::kDouble;
    default:
      return absl::UnimplementedError(StrCat("safetensors dtype ", checkpoint::StDTypeName(dtype), " has no ATen type"));
  }
}

absl::StatusOr<at::Tensor> ViewTensor(const checkpoint::TensorRef& ref) {
  auto type = AtenTypeOf(ref.info->dtype);
  if (!type.ok()) return absl::Status(type.status().code(), StrCat("tensor \"", ref.info->name, "\": ", std::string(type.status().message())));
  const std::string_view bytes = ref.bytes();
  const int64_t element = checkpoint::StDTypeSize(ref.info->dtype);
  const auto options = at::TensorOptions().dtype(*type).device(at::kCPU);
  void* data = const_cast<char*>(bytes.data());
  if (reinterpret_cast<uintptr_t>(data) % static_cast<uintptr_t>(element) != 0) {
    at::Tensor copy = at::empty(ref.info->shape, options);
    std::memcpy(copy.data_ptr(), bytes.data(), bytes.size());
    return copy;
  }
  // The deleter owns a copy of the reference: the mapping lives as long as the tensor's storage.
  auto keep = std::make_shared<checkpoint::TensorRef>(ref);
  return at::from_blob(data, ref.info->shape, [keep](void*) { keep->Release(); }, options);
}

absl::StatusOr<at::Tensor> LoadAs(const checkpoint::TensorRef& ref, at::ScalarType dtype) {
  const StDType source = ref.info->dtype;
  if (source != StDType::kF32 && source != StDType::kF16 && source != StDType::kBF16 && source != StDType::kF64) {
    return absl::InvalidArgumentError(StrCat("tensor \"", ref.info->name, "\" has dtype ", checkpoint::StDTypeName(source),
                                             ", not a float weight (F32, F16, BF16, F64)"));
  }
  auto view = ViewTensor(ref);
  if (!view.ok()) return view.status();
  if (view->scalar_type() == dtype) return view;
  at::Tensor converted = view->to(dtype);
  ref.Release();
  return converted;
}

absl::StatusOr<std::string_view> HostBytes(const at::Tensor& t, const std::string& name) {
  if (!t.defined()) return absl::InternalError(name + ": undefined tensor");
  if (!t.device().is_cpu()) {
    return absl::InternalError(name + ": on " + t.device().str() + ", not in host memory (writers take host tensors)");
  }
  if (!t.is_contiguous()) return absl::InternalError(name + ": not contiguous");
  return std::string_view(static_cast<const char*>(t.data_ptr()), t.nbytes());
}

}  // namespace quark::runtime
