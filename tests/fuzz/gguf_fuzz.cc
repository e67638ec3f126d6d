// libFuzzer target for the GGUF reader (core/export/gguf_file.cc), which maps a file that `quark eval --model
// FILE.gguf` takes from anywhere. A file that opens must describe tensors inside it, and its typed metadata
// getters must answer every key without undefined behaviour.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/export/gguf_file.h"
#include "tests/fuzz/scratch_file.h"

namespace {

void Check(bool condition) {
  if (!condition) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // GgufFile::Open maps a path.
  static quark::fuzz::ScratchFile scratch("gguf_fuzz");
  namespace gguf = quark::exporter::gguf;
  auto file = gguf::GgufFile::Open(scratch.Write(data, size));
  if (!file.ok()) return 0;
  const gguf::GgufFile& f = **file;
  for (const auto& [key, value] : f.metadata()) {
    (void)f.GetInt(key);
    (void)f.GetFloat(key);
    (void)f.GetString(key);
  }
  for (const gguf::TensorInfo& t : f.tensors()) {
    Check(f.data_offset() <= size && t.offset <= size - f.data_offset() && t.nbytes <= size - f.data_offset() - t.offset);
    Check(t.nbytes == gguf::TensorBytes(t.type, t.ne));
    Check(f.FindTensor(t.name) == &t);
    // Every byte of the tensor is readable (ASan sees the mapping only through this copy).
    std::string bytes(reinterpret_cast<const char*>(f.TensorData(t)), t.nbytes);
    Check(bytes.size() == t.nbytes);
  }
  return 0;
}
