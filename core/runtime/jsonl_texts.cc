#include "core/runtime/jsonl_texts.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace quark::runtime {

absl::StatusOr<std::vector<JsonlText>> ParseJsonlTexts(const std::string& label, std::string_view contents) {
  std::vector<JsonlText> texts;
  int64_t line_no = 0;
  size_t start = 0;
  while (start < contents.size()) {
    size_t end = contents.find('\n', start);
    if (end == std::string_view::npos) end = contents.size();
    const std::string_view line = contents.substr(start, end - start);
    start = end + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    auto record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (record.is_discarded() || !record.is_object() || !record.contains("text") || !record["text"].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(label, ":", line_no, ": not a JSON object with a string \"text\""));
    }
    texts.push_back({line_no, record["text"].get<std::string>()});
  }
  if (texts.empty()) return absl::InvalidArgumentError(absl::StrCat(label, " holds no JSONL lines"));
  return texts;
}

}  // namespace quark::runtime
