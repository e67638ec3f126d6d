// libFuzzer target for the safetensors header parser and validator (the code that faces hostile files).
//
// Built only with clang, in its own build folder; scripts/fuzz.sh safetensors_fuzz builds and runs it (seeds in
// tests/fuzz/corpus/safetensors_fuzz).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/checkpoint/safetensors_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view image(reinterpret_cast<const char*>(data), size);
  auto header = quark::checkpoint::ParseSafetensorsHeader(image, size, "fuzz.safetensors");
  if (header.ok()) {
    // A header that validates must describe bytes inside the image.
    for (const auto& tensor : header->tensors) {
      if (header->data_offset + tensor.end > size || tensor.begin > tensor.end) __builtin_trap();
    }
    (void)quark::checkpoint::SerializeSafetensorsHeader(header->tensors, header->metadata);
  }
  return 0;
}
