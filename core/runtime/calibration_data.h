// Calibration samples from a text file (random token windows, seeded and deterministic: the same options give the
// same samples on every machine), or from a file of samples, one per line (a JSONL file with a "text" field, or a
// token-id file), used as given and in file order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/runtime/tokenizer.h"

namespace quark::runtime {

enum class CalibrationFormat {
  kAuto,      // by extension: .jsonl -> kJsonl, .ids/.tokens -> kTokenIds, else kText
  kText,      // the whole file is one document, from which random windows are drawn
  kJsonl,     // one JSON object per line; its "text" field is one sample
  kTokenIds,  // ReadTokenIdFile: each line one sample of token ids (no tokenizer needed)
};

struct CalibrationOptions {
  std::string path;
  CalibrationFormat format = CalibrationFormat::kAuto;
  int64_t num_samples = 128;  // text: windows drawn; JSONL / token ids: at most this many lines used
  int64_t seq_len = 512;      // text: window length; JSONL / token ids: longer lines are truncated to it
  uint64_t seed = 42;         // text only
};

/// Samples, each [1, L] int64: L = seq_len for text windows, 1 <= L <= seq_len for JSONL / token-id lines.
struct CalibrationSet {
  std::vector<at::Tensor> samples;
  /// Tokens the samples were taken from: the token stream's length for text; for JSONL / token-id files the tokens
  /// of the lines used, before truncation.
  int64_t total_tokens = 0;
};

/// Text (kText): the token stream is [BOS] + encode(whole file); num_samples windows of seq_len tokens, window k
/// starting at r_k mod (len - seq_len + 1), r_k the k-th output of std::mt19937_64(seed).
/// JSONL and token ids (kJsonl, kTokenIds): samples as given, in file order. Sample k is the k-th non-empty line,
/// [BOS] + encode(text) for JSONL, the ids as they are for token ids, truncated to its first seq_len tokens (a
/// shorter line gives a shorter sample: never padded). The first num_samples such lines are used; a file with fewer
/// gives fewer samples. The seed is not used. Every line of the file is checked, used or not.
/// `tokenizer` may be null for token-id files. Errors (INVALID_ARGUMENT; NOT_FOUND for a missing file) name the
/// file, and the line where one is at fault: non-positive counts, no tokenizer for text or JSONL, a JSONL line that
/// is not a JSON object with a string "text" (or whose text gives no tokens), a token-id line with something other
/// than ids, a file with no samples, a text stream shorter than seq_len.
absl::StatusOr<CalibrationSet> LoadCalibrationSet(const CalibrationOptions& options, const Tokenizer* tokenizer);

}  // namespace quark::runtime
