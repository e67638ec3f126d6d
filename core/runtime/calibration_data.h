// Calibration samples: token windows drawn from a text file, a JSONL file with a "text" field, or a
// token-id file; seeded and deterministic (the same options give the same samples on every machine).
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
  kText,      // the whole file is one document
  kJsonl,     // one JSON object per line; its "text" field is a document
  kTokenIds,  // ReadTokenIdFile: each line a document of token ids (no tokenizer needed)
};

struct CalibrationOptions {
  std::string path;
  CalibrationFormat format = CalibrationFormat::kAuto;
  int64_t num_samples = 128;
  int64_t seq_len = 512;
  uint64_t seed = 42;
};

/// Samples, each [1, seq_len] int64.
struct CalibrationSet {
  std::vector<at::Tensor> samples;
  int64_t total_tokens = 0;  // length of the token stream the samples were drawn from
};

/// The token stream is the concatenation, over documents in file order, of [BOS] + encode(document) (token-id
/// documents as they are). Sample k starts at r_k mod (len - seq_len + 1), r_k the k-th output of
/// std::mt19937_64(seed). `tokenizer` may be null for token-id files. Errors name the file (and line): missing
/// file, bad JSON or missing "text", a stream shorter than seq_len, non-positive counts.
absl::StatusOr<CalibrationSet> LoadCalibrationSet(const CalibrationOptions& options, const Tokenizer* tokenizer);

}  // namespace quark::runtime
