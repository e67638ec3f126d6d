#include "core/runtime/calibration_data.h"

#include <algorithm>
#include <random>

#include "core/base/strings.h"
#include "core/runtime/jsonl_texts.h"

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

absl::Status NeedsTokenizer(const std::string& path, const Tokenizer* tokenizer) {
  if (tokenizer != nullptr) return absl::OkStatus();
  return absl::InvalidArgumentError(StrCat(path, ": text calibration data needs a tokenizer"));
}

// [BOS] + encode(text) of the first `limit` non-blank JSONL lines, in file order. Every line is parsed (a bad line
// after the used ones is still an error); only the used ones are tokenized.
absl::StatusOr<std::vector<std::vector<int64_t>>> JsonlSequences(const std::string& path, const Tokenizer& tokenizer,
                                                                 int64_t limit) {
  auto text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<std::vector<JsonlText>> lines = ParseJsonlTexts(path, *text);
  if (!lines.ok()) return lines.status();
  std::vector<std::vector<int64_t>> sequences;
  for (const JsonlText& line : *lines) {
    if (static_cast<int64_t>(sequences.size()) >= limit) break;
    auto ids = tokenizer.EncodeWithBos(line.text);
    if (!ids.ok()) return ids.status();
    if (ids->empty()) return absl::InvalidArgumentError(StrCat(path, ":", line.line, ": \"text\" gives no tokens"));
    sequences.push_back(*std::move(ids));
  }
  return sequences;
}

// Samples as given: one per line, the first num_samples lines, each cut to seq_len tokens.
absl::StatusOr<CalibrationSet> LineSamples(const CalibrationOptions& options, CalibrationFormat format,
                                           const Tokenizer* tokenizer) {
  absl::StatusOr<std::vector<std::vector<int64_t>>> sequences;
  if (format == CalibrationFormat::kTokenIds) {
    sequences = ReadTokenIdFile(options.path);
  } else {
    if (auto status = NeedsTokenizer(options.path, tokenizer); !status.ok()) return status;
    sequences = JsonlSequences(options.path, *tokenizer, options.num_samples);
  }
  if (!sequences.ok()) return sequences.status();
  CalibrationSet set;
  const size_t used = std::min(sequences->size(), static_cast<size_t>(options.num_samples));
  for (size_t k = 0; k < used; ++k) {
    const std::vector<int64_t>& ids = (*sequences)[k];
    const int64_t size = static_cast<int64_t>(ids.size());
    set.total_tokens += size;
    const at::ArrayRef<int64_t> kept(ids.data(), static_cast<size_t>(std::min(size, options.seq_len)));
    set.samples.push_back(at::tensor(kept, at::kLong).unsqueeze(0));
  }
  return set;
}

// Random windows of the token stream [BOS] + encode(whole file).
absl::StatusOr<CalibrationSet> TextWindows(const CalibrationOptions& options, const Tokenizer* tokenizer) {
  if (auto status = NeedsTokenizer(options.path, tokenizer); !status.ok()) return status;
  auto text = ReadTextFile(options.path);
  if (!text.ok()) return text.status();
  auto stream = tokenizer->EncodeWithBos(*text);
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

}  // namespace

absl::StatusOr<CalibrationSet> LoadCalibrationSet(const CalibrationOptions& options, const Tokenizer* tokenizer) {
  if (options.num_samples <= 0 || options.seq_len <= 0) {
    return absl::InvalidArgumentError(StrCat("num_samples = ", options.num_samples, " and seq_len = ", options.seq_len,
                                             " must be positive"));
  }
  const CalibrationFormat format = Resolve(options);
  if (format == CalibrationFormat::kText) return TextWindows(options, tokenizer);
  return LineSamples(options, format, tokenizer);
}

}  // namespace quark::runtime
