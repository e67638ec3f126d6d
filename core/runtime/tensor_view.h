// at::Tensor views over checkpoint bytes (zero copy, the mapping kept alive by the tensor).
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/checkpoint/checkpoint_reader.h"

namespace quark::runtime {

/// The ATen dtype of a safetensors dtype. F8_E4M3 / F8_E5M2 / U16 / U32 / U64 have no ATen type in every
/// supported LibTorch version: they come back as uint8 bytes (F8) or are refused (Unimplemented).
absl::StatusOr<at::ScalarType> AtenTypeOf(checkpoint::StDType dtype);

/// A read-only CPU tensor over the tensor's bytes in the mmap (F8 types as uint8 of the same shape). The tensor
/// holds a reference to the file; when the last user drops it, its pages leave the resident set
/// (MappedFile::Release). Data whose address is not aligned for its element type is copied instead.
/// Do not write through the returned tensor.
absl::StatusOr<at::Tensor> ViewTensor(const checkpoint::TensorRef& ref);

/// ViewTensor converted to `dtype` (float types only: F32/F16/BF16/F64 sources). When the source already has
/// `dtype` this is the zero-copy view; otherwise a new tensor, and the source pages are released at once.
absl::StatusOr<at::Tensor> LoadAs(const checkpoint::TensorRef& ref, at::ScalarType dtype);

/// The bytes of a contiguous tensor in host memory, for a writer. A tensor on a device (whose data pointer is no
/// host address) or a strided one is INTERNAL naming `name`: the caller forgot its hand-off to the host.
absl::StatusOr<std::string_view> HostBytes(const at::Tensor& t, const std::string& name);

}  // namespace quark::runtime
