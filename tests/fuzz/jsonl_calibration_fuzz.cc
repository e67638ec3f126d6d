// libFuzzer target for JSONL calibration files (core/runtime/jsonl_texts.cc: ParseJsonlTexts, what
// LoadCalibration reads a tenant's .jsonl with). Whatever the bytes, parsing returns; what it accepts holds at
// least one text, line numbers rise strictly and stay within the file's lines, and every text is valid UTF-8 that
// the JSON writer takes and reads back equal (a text that could not be written back would abort a worker later).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/runtime/jsonl_texts.h"

namespace {

void Check(bool condition) {
  if (!condition) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view contents(reinterpret_cast<const char*>(data), size);
  auto texts = quark::runtime::ParseJsonlTexts("fuzz.jsonl", contents);
  if (!texts.ok()) {
    Check(!texts.status().message().empty());
    return 0;
  }
  Check(!texts->empty());
  int64_t lines = 1;
  for (char c : contents) lines += c == '\n' ? 1 : 0;
  int64_t previous = 0;
  for (const quark::runtime::JsonlText& text : *texts) {
    Check(text.line > previous && text.line <= lines);
    previous = text.line;
    nlohmann::json record = {{"text", text.text}};
    const std::string written = record.dump();  // throws (and so aborts the fuzzer) on text that is not UTF-8
    Check(nlohmann::json::parse(written)["text"].get<std::string>() == text.text);
  }
  return 0;
}
