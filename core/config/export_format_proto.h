// JobSpec.export_formats (service.proto) in the engine's names ("hf_quark", "gguf", "onnx", "compressed_tensors"):
// quarkd checks them at SubmitJob and the worker hands them to the engine, so both read the enum the same way.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "quark/v1/service.pb.h"

namespace quark {

/// The engine's name of spec.export_formats[index] (EXPORT_FORMAT_UNSPECIFIED is HF-quark, the default export);
/// INVALID_ARGUMENT naming the field for a value this build does not know.
inline absl::StatusOr<std::string> ExportFormatName(int format, int index) {
  switch (format) {
    case quark::v1::EXPORT_FORMAT_UNSPECIFIED:
    case quark::v1::EXPORT_FORMAT_HF_QUARK: return std::string("hf_quark");
    case quark::v1::EXPORT_FORMAT_GGUF: return std::string("gguf");
    case quark::v1::EXPORT_FORMAT_ONNX: return std::string("onnx");
    case quark::v1::EXPORT_FORMAT_COMPRESSED_TENSORS: return std::string("compressed_tensors");
    default:
      return absl::InvalidArgumentError(absl::StrCat("spec.export_formats[", index, "]: unknown value ", format));
  }
}

}  // namespace quark
