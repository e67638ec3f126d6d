#include "core/eval/csv_records.h"

#include <fstream>
#include <sstream>

#include "core/base/strings.h"

namespace quark::eval {

absl::StatusOr<std::vector<CsvRecord>> ParseCsv(const std::string& text, const std::string& file) {
  std::vector<CsvRecord> records;
  CsvRecord record{1, {}};
  std::string field;
  int64_t line = 1;
  size_t i = 0;
  bool at_record_start = true;
  while (i < text.size()) {
    if (at_record_start) {
      record = CsvRecord{line, {}};
      at_record_start = false;
    }
    if (text[i] == '"') {
      const int64_t quote_line = line;
      ++i;
      while (true) {
        if (i >= text.size()) return absl::InvalidArgumentError(StrCat(file, ":", quote_line, ": unterminated quote"));
        if (text[i] == '"') {
          if (i + 1 < text.size() && text[i + 1] == '"') {
            field += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        if (text[i] == '\n') ++line;
        field += text[i++];
      }
      if (i < text.size() && text[i] != ',' && text[i] != '\n' && text[i] != '\r') {
        return absl::InvalidArgumentError(StrCat(file, ":", line, ": text after a closing quote"));
      }
    } else {
      while (i < text.size() && text[i] != ',' && text[i] != '\n' && text[i] != '\r') field += text[i++];
    }
    record.fields.push_back(std::move(field));
    field.clear();
    if (i < text.size() && text[i] == ',') {
      ++i;
      if (i == text.size()) record.fields.emplace_back();
      continue;
    }
    if (i < text.size() && text[i] == '\r') ++i;
    if (i < text.size() && text[i] == '\n') ++i;
    ++line;
    records.push_back(std::move(record));
    at_record_start = true;
  }
  if (!at_record_start) records.push_back(std::move(record));
  return records;
}

absl::StatusOr<std::vector<CsvRecord>> ReadCsvRecords(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return absl::NotFoundError(StrCat("task file ", file, " cannot be read"));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return ParseCsv(buffer.str(), file);
}

}  // namespace quark::eval
