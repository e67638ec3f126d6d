// Small string helpers on std::string_view. Debian's abseil has its own absl::string_view (not std's), so absl's
// string functions do not accept std::string_view; these do, and also take absl::string_view (Status messages).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/strings/string_view.h"

namespace quark::str {

inline void AppendPiece(std::string& out, std::string_view piece) { out.append(piece); }
inline void AppendPiece(std::string& out, const char* piece) { out.append(piece); }
inline void AppendPiece(std::string& out, const std::string& piece) { out.append(piece); }
#if !defined(ABSL_USES_STD_STRING_VIEW)
inline void AppendPiece(std::string& out, absl::string_view piece) { out.append(piece.data(), piece.size()); }
#endif
inline void AppendPiece(std::string& out, char c) { out.push_back(c); }
inline void AppendPiece(std::string& out, bool b) { out.append(b ? "true" : "false"); }
template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
void AppendPiece(std::string& out, T value) {
  if constexpr (std::is_floating_point_v<T>) {
    std::string text = std::to_string(value);
    while (text.size() > 1 && text.back() == '0') text.pop_back();
    if (!text.empty() && text.back() == '.') text.pop_back();
    out.append(text);
  } else {
    out.append(std::to_string(value));
  }
}

/// Concatenates strings, string views (std and absl), characters and numbers.
template <typename... Args>
std::string Cat(const Args&... args) {
  std::string out;
  (AppendPiece(out, args), ...);
  return out;
}

template <typename... Args>
void Append(std::string* out, const Args&... args) {
  (AppendPiece(*out, args), ...);
}

inline std::string_view View(absl::string_view s) { return std::string_view(s.data(), s.size()); }

bool StartsWith(std::string_view text, std::string_view prefix);
bool EndsWith(std::string_view text, std::string_view suffix);
bool Contains(std::string_view text, std::string_view needle);
std::string ToLower(std::string_view text);
std::string_view Trim(std::string_view text);
std::string_view StripPrefix(std::string_view text, std::string_view prefix);
std::string_view StripSuffix(std::string_view text, std::string_view suffix);
std::vector<std::string> Split(std::string_view text, char separator);
std::string Join(const std::vector<std::string>& parts, std::string_view separator);
/// Whole-string decimal parse; false on junk or overflow.
bool ParseInt64(std::string_view text, int64_t* value);

}  // namespace quark::str
