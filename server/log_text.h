// Text from requests and workers, made safe for one log line: core/base/log.h's JSON pattern puts the message
// between quotes without escaping it, so quotes, backslashes and control characters are replaced here.
#pragma once

#include <string>
#include <string_view>

namespace quark::server {

/// `"` becomes `'`, `\` becomes `/`, control characters become spaces; at most `max_bytes` kept.
inline std::string ForLog(std::string_view text, size_t max_bytes = 2048) {
  std::string out(text.substr(0, max_bytes));
  for (char& c : out) {
    if (c == '"') c = '\'';
    else if (c == '\\') c = '/';
    else if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  return out;
}

}  // namespace quark::server
