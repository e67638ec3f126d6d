// RFC 4180 CSV (the MMLU files): comma-separated fields, double-quoted fields may hold commas, newlines and "" for a
// quote. No header.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace quark::eval {

struct CsvRecord {
  int64_t line = 0;  // 1-based line where the record starts
  std::vector<std::string> fields;
};

/// Every record of `file`. NotFound when it cannot be read; InvalidArgument naming the line of an unterminated quote
/// or of text after a closing quote.
absl::StatusOr<std::vector<CsvRecord>> ReadCsvRecords(const std::string& file);

/// The same over text already read (`file` only names it in errors).
absl::StatusOr<std::vector<CsvRecord>> ParseCsv(const std::string& text, const std::string& file);

}  // namespace quark::eval
