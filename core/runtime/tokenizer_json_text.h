// Text helpers behind the tokenizer.json reader: UTF-8 walking, the GPT-2 byte-level alphabet, Unicode
// normalization (ICU) and Unicode-aware regexes (PCRE2 with UTF + UCP, the dialect of the split patterns that
// Hugging Face tokenizers write: \p{L}, \p{N}, (?i:...), lookahead).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace quark::runtime::tokenizer_json {

/// Byte offset of the first invalid UTF-8 sequence in `text`, or npos when it is all valid.
size_t FindInvalidUtf8(std::string_view text);
/// The code point at `*pos` (valid UTF-8 assumed); advances `*pos` past it.
char32_t NextCodePoint(std::string_view text, size_t* pos);
void AppendUtf8(char32_t code_point, std::string* out);
/// One string per code point.
std::vector<std::string> SplitCodePoints(std::string_view text);
/// Unicode White_Space (what Rust's char::is_whitespace answers; lstrip/rstrip of added tokens use it).
bool IsWhitespace(char32_t code_point);
std::string_view TrimWhitespaceLeft(std::string_view text);
std::string_view TrimWhitespaceRight(std::string_view text);

/// GPT-2's bytes_to_unicode(): printable bytes map to themselves, the others to U+0100.. in order. Each entry
/// is the UTF-8 of the code point for that byte.
const std::vector<std::string>& ByteLevelAlphabet();
/// Every byte of `bytes` as its byte-level character.
std::string ByteLevelEncode(std::string_view bytes);
/// The inverse; false when `text` holds a character outside the alphabet (it is then copied through).
bool ByteLevelDecode(std::string_view text, std::string* bytes);

enum class NormalForm { kNfc, kNfd, kNfkc, kNfkd };
/// ICU's Normalizer2 over UTF-8 text.
absl::StatusOr<std::string> UnicodeNormalize(std::string_view text, NormalForm form);
/// Full Unicode lowercasing (root locale).
std::string UnicodeLowercase(std::string_view text);

/// A compiled PCRE2 pattern (UTF, UCP; JIT where available). Immutable after Compile: FindAll is thread-safe.
class Regex {
 public:
  /// InvalidArgument naming `where` and PCRE2's message and offset when `pattern` does not compile.
  static absl::StatusOr<std::unique_ptr<Regex>> Compile(const std::string& pattern, const std::string& where);
  /// Pattern for a literal string.
  static absl::StatusOr<std::unique_ptr<Regex>> Literal(const std::string& text, const std::string& where);
  ~Regex();
  /// Every non-empty, non-overlapping match as [begin, end) byte offsets, left to right. `text` must be valid
  /// UTF-8 (checked by the caller once; PCRE2's own check would rescan the subject on every match).
  std::vector<std::pair<size_t, size_t>> FindAll(std::string_view text) const;

 private:
  struct Code;
  explicit Regex(std::unique_ptr<Code> code);
  std::unique_ptr<Code> code_;
};

}  // namespace quark::runtime::tokenizer_json
