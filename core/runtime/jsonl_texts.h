// The lines of a JSONL calibration file (one JSON object per line, its "text" field one sample), apart from the
// tokenizer and LibTorch so that the parser can be fuzzed alone (tests/fuzz/jsonl_calibration_fuzz.cc).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace quark::runtime {

struct JsonlText {
  int64_t line = 0;  // 1-based line number in the file
  std::string text;  // the line's "text" (valid UTF-8: the JSON parser refuses anything else)
};

/// Every non-blank line of `contents`, in order. INVALID_ARGUMENT "<label>:<line>: not a JSON object with a string
/// \"text\"" for the first line that is not, "<label> holds no JSONL lines" when every line is blank.
absl::StatusOr<std::vector<JsonlText>> ParseJsonlTexts(const std::string& label, std::string_view contents);

}  // namespace quark::runtime
