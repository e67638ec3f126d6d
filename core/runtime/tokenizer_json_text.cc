#include "core/runtime/tokenizer_json_text.h"
#include "core/runtime/unicode_properties.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/unistr.h>

#include <unordered_map>

#include "core/base/strings.h"

namespace quark::runtime::tokenizer_json {

size_t FindInvalidUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    size_t length = 0;
    char32_t min = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      length = 2, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      length = 3, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      length = 4, min = 0x10000;
    } else {
      return i;
    }
    if (i + length > text.size()) return i;
    char32_t cp = c & (0x7F >> length);
    for (size_t k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (next & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += length;
  }
  return std::string_view::npos;
}

char32_t NextCodePoint(std::string_view text, size_t* pos) {
  const auto c = static_cast<unsigned char>(text[*pos]);
  size_t length = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
  char32_t cp = length == 1 ? c : c & (0x7F >> length);
  for (size_t k = 1; k < length && *pos + k < text.size(); ++k) {
    cp = (cp << 6) | (static_cast<unsigned char>(text[*pos + k]) & 0x3F);
  }
  *pos += length;
  return cp;
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::vector<std::string> SplitCodePoints(std::string_view text) {
  std::vector<std::string> out;
  for (size_t pos = 0; pos < text.size();) {
    const size_t begin = pos;
    NextCodePoint(text, &pos);
    out.emplace_back(text.substr(begin, pos - begin));
  }
  return out;
}

bool IsWhitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::string_view TrimWhitespaceLeft(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t next = pos;
    if (!IsWhitespace(NextCodePoint(text, &next))) break;
    pos = next;
  }
  return text.substr(pos);
}

std::string_view TrimWhitespaceRight(std::string_view text) {
  size_t end = text.size();
  while (end > 0) {
    size_t begin = end - 1;
    while (begin > 0 && (static_cast<unsigned char>(text[begin]) & 0xC0) == 0x80) --begin;
    size_t pos = begin;
    if (!IsWhitespace(NextCodePoint(text, &pos))) break;
    end = begin;
  }
  return text.substr(0, end);
}

const std::vector<std::string>& ByteLevelAlphabet() {
  static const std::vector<std::string> alphabet = [] {
    std::vector<std::string> table(256);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      AppendUtf8(printable ? static_cast<char32_t>(b) : next++, &table[b]);
    }
    return table;
  }();
  return alphabet;
}

std::string ByteLevelEncode(std::string_view bytes) {
  const auto& alphabet = ByteLevelAlphabet();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += alphabet[static_cast<unsigned char>(c)];
  return out;
}

bool ByteLevelDecode(std::string_view text, std::string* bytes) {
  static const std::unordered_map<std::string, char> inverse = [] {
    std::unordered_map<std::string, char> map;
    const auto& alphabet = ByteLevelAlphabet();
    for (int b = 0; b < 256; ++b) map[alphabet[b]] = static_cast<char>(b);
    return map;
  }();
  bool all = true;
  for (const std::string& ch : SplitCodePoints(text)) {
    auto it = inverse.find(ch);
    if (it == inverse.end()) {
      *bytes += ch;
      all = false;
    } else {
      bytes->push_back(it->second);
    }
  }
  return all;
}

absl::StatusOr<std::string> UnicodeNormalize(std::string_view text, NormalForm form) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* normalizer = nullptr;
  switch (form) {
    case NormalForm::kNfc: normalizer = icu::Normalizer2::getNFCInstance(status); break;
    case NormalForm::kNfd: normalizer = icu::Normalizer2::getNFDInstance(status); break;
    case NormalForm::kNfkc: normalizer = icu::Normalizer2::getNFKCInstance(status); break;
    case NormalForm::kNfkd: normalizer = icu::Normalizer2::getNFKDInstance(status); break;
  }
  if (U_FAILURE(status)) return absl::InternalError(StrCat("ICU normalizer unavailable: ", u_errorName(status)));
  const icu::UnicodeString source = icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), text.size()));
  if (normalizer->isNormalized(source, status) && U_SUCCESS(status)) return std::string(text);
  const icu::UnicodeString result = normalizer->normalize(source, status);
  if (U_FAILURE(status)) return absl::InvalidArgumentError(StrCat("Unicode normalization failed: ", u_errorName(status)));
  std::string out;
  result.toUTF8String(out);
  return out;
}

std::string UnicodeLowercase(std::string_view text) {
  icu::UnicodeString s = icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), text.size()));
  s.toLower(icu::Locale::getRoot());
  std::string out;
  s.toUTF8String(out);
  return out;
}

struct Regex::Code {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Code() { pcre2_code_free(code); }
};

Regex::Regex(std::unique_ptr<Code> code) : code_(std::move(code)) {}
Regex::~Regex() = default;

absl::StatusOr<std::unique_ptr<Regex>> Regex::Compile(const std::string& pattern, const std::string& where) {
  // Errors are reported on the pattern as written; what runs has the Unicode 16.0 categories in place of PCRE2's
  // older tables (unicode_properties.h).
  for (const bool expanded : {false, true}) {
    std::string compiled = pattern;
    if (expanded) {
      absl::StatusOr<std::string> rewritten = WithUnicode16Properties(pattern, where);
      if (!rewritten.ok()) return rewritten.status();
      compiled = *std::move(rewritten);
    }
    int error = 0;
    PCRE2_SIZE offset = 0;
    auto code = std::make_unique<Code>();
    code->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(compiled.data()), compiled.size(),
                               PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
    if (code->code == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof(message));
      return absl::InvalidArgumentError(StrCat(where, ": regex \"", pattern, "\" does not compile at offset ",
                                               offset, expanded ? " of its Unicode 16 form" : "", ": ",
                                               reinterpret_cast<const char*>(message)));
    }
    if (!expanded) continue;
    code->jit = pcre2_jit_compile(code->code, PCRE2_JIT_COMPLETE) == 0;
    return std::unique_ptr<Regex>(new Regex(std::move(code)));
  }
  return absl::InternalError(StrCat(where, ": unreachable"));
}

absl::StatusOr<std::unique_ptr<Regex>> Regex::Literal(const std::string& text, const std::string& where) {
  return Compile(StrCat("\\Q", text, "\\E"), where);
}

std::vector<std::pair<size_t, size_t>> Regex::FindAll(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> matches;
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> data(
      pcre2_match_data_create_from_pattern(code_->code, nullptr), &pcre2_match_data_free);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  while (start <= text.size()) {
    const int rc = code_->jit ? pcre2_jit_match(code_->code, subject, text.size(), start, 0, data.get(), nullptr)
                              : pcre2_match(code_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK,
                                            data.get(), nullptr);
    if (rc < 0) break;
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data.get());
    const size_t begin = ovector[0], end = ovector[1];
    if (end > begin) {
      matches.emplace_back(begin, end);
      start = end;
    } else {
      if (begin >= text.size()) break;
      size_t next = begin;
      NextCodePoint(text, &next);
      start = next;
    }
  }
  return matches;
}

}  // namespace quark::runtime::tokenizer_json
