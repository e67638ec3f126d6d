#include "core/runtime/calibration_data.h"

#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/base/strings.h"

namespace quark::runtime {
namespace {

CalibrationFormat Resolve(const CalibrationOptions& options) {
  if (options.format != CalibrationFormat::kAuto) return options.format;
  auto ends_with = [&](const std::string& suffix) {
    return options.path.size() >= suffix.size() && options.path.compare(options.path.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends_with(".jsonl")) return CalibrationFormat::kJsonl;
  if (ends_with(".ids") || ends_with(".tokens")) return CalibrationFormat::kTokenIds;
  return CalibrationFormat::kText;
}

absl::StatusOr<std::vector<std::string>> ReadDocuments(const std::string& path, CalibrationFormat format) {
  auto text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  if (format == CalibrationFormat::kText) return std::vector<std::string>{*std::move(text)};
  std::vector<std::string> documents;
  std::istringstream lines(*text);
  std::string line;
  for (int64_t line_no = 1; std::getline(lines, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (record.is_discarded() || !record.is_object() || !record.contains("text") || !record["text"].is_string()) {
      return absl::InvalidArgumentError(StrCat(path, ":", line_no, ": not a JSON object with a string \"text\""));
    }
    documents.push_back(record["text"].get<std::string>());
  }
  return documents;
}

absl::StatusOr<std::vector<int64_t>> TokenStream(const CalibrationOptions& options, const Tokenizer* tokenizer) {
  const CalibrationFormat format = Resolve(options);
  std::vector<int64_t> stream;
  if (format == CalibrationFormat::kTokenIds) {
    auto sequences = ReadTokenIdFile(options.path);
    if (!sequences.ok()) return sequences.status();
    for (const auto& ids : *sequences) stream.insert(stream.end(), ids.begin(), ids.end());
    return stream;
  }
  if (tokenizer == nullptr) return absl::InvalidArgumentError(StrCat(options.path, ": text calibration data needs a tokenizer"));
  auto documents = ReadDocuments(options.path, format);
  if (!documents.ok()) return documents.status();
  for (const std::string& document : *documents) {
    auto ids = tokenizer->EncodeWithBos(document);
    if (!ids.ok()) return ids.status();
    stream.insert(stream.end(), ids->begin(), ids->end());
  }
  return stream;
}

}  // namespace

absl::StatusOr<CalibrationSet> LoadCalibrationSet(const CalibrationOptions& options, const Tokenizer* tokenizer) {
  if (options.num_samples <= 0 || options.seq_len <= 0) {
    return absl::InvalidArgumentError(StrCat("num_samples = ", options.num_samples, " and seq_len = ", options.seq_len,
                                             " must be positive"));
  }
  auto stream = TokenStream(options, tokenizer);
  if (!stream.ok()) return stream.status();
  const int64_t total = static_cast<int64_t>(stream->size());
  if (total < options.seq_len) {
    return absl::InvalidArgumentError(StrCat(options.path, " gives ", total, " tokens, fewer than seq_len = ", options.seq_len));
  }
  CalibrationSet set;
  set.total_tokens = total;
  const at::Tensor all = at::tensor(*stream, at::kLong);
  // mt19937_64's output sequence is fixed by the standard (unlike the distributions), so the draw is portable.
  std::mt19937_64 rng(options.seed);
  const uint64_t starts = static_cast<uint64_t>(total - options.seq_len + 1);
  for (int64_t k = 0; k < options.num_samples; ++k) {
    const int64_t start = static_cast<int64_t>(rng() % starts);
    set.samples.push_back(all.narrow(0, start, options.seq_len).clone().unsqueeze(0));
  }
  return set;
}

}  // namespace quark::runtime
