// Text from requests and workers, made safe for one log line. JSON escaping is the log facade's job
// (core/base/log.cc escapes every message); here a request's text is only bounded and kept on one line, so that
// a client cannot forge extra log lines in the text format.
#pragma once

#include <string>
#include <string_view>

namespace quark::server {

/// Control characters (newlines included) become spaces; at most `max_bytes` kept.
inline std::string ForLog(std::string_view text, size_t max_bytes = 2048) {
  std::string out(text.substr(0, max_bytes));
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  return out;
}

}  // namespace quark::server
