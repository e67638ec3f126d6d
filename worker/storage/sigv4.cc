#include "worker/storage/sigv4.h"
#include "worker/storage/strings.h"

#include <algorithm>
#include <cctype>
#include <ctime>

#include "core/base/digest.h"

namespace quark::storage {
namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;

// Lower-cased names, values trimmed with inner runs of spaces collapsed, sorted by name.
Pairs CanonicalHeaders(const Pairs& headers) {
  Pairs out;
  for (const auto& [name, value] : headers) {
    std::string v(str::Trim(value));
    std::string collapsed;
    for (char c : v) {
      if (c == ' ' && !collapsed.empty() && collapsed.back() == ' ') continue;
      collapsed.push_back(c);
    }
    out.emplace_back(str::ToLower(name), std::move(collapsed));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string SignedHeaders(const Pairs& canonical) {
  std::vector<std::string> names;
  for (const auto& header : canonical) names.push_back(header.first);
  return str::Join(names, ";");
}

}  // namespace

std::string UriEncode(std::string_view text, bool encode_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (c == '/' && !encode_slash)) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::string CanonicalQueryString(const Pairs& query) {
  Pairs encoded;
  for (const auto& [name, value] : query) encoded.emplace_back(UriEncode(name, true), UriEncode(value, true));
  std::sort(encoded.begin(), encoded.end());
  std::vector<std::string> parts;
  for (const auto& [name, value] : encoded) parts.push_back(str::Cat(name, "=", value));
  return str::Join(parts, "&");
}

std::string AmzDate(std::chrono::system_clock::time_point time) {
  std::time_t t = std::chrono::system_clock::to_time_t(time);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y%m%dT%H%M%SZ", &tm);
  return buffer;
}

std::string CanonicalRequest(const SigV4Request& request) {
  Pairs headers = CanonicalHeaders(request.headers);
  std::string header_block;
  for (const auto& [name, value] : headers) str::Append(&header_block, name, ":", value, "\n");
  return str::Cat(request.method, "\n", request.encoded_path.empty() ? "/" : request.encoded_path, "\n",
                      CanonicalQueryString(request.query), "\n", header_block, "\n", SignedHeaders(headers), "\n",
                      request.payload_sha256_hex);
}

std::string SignV4(const SigV4Request& request, const SigV4Credentials& credentials, std::string_view region,
                   std::string_view service, std::string_view amz_date) {
  std::string_view date = amz_date.substr(0, 8);
  std::string scope = str::Cat(date, "/", region, "/", service, "/aws4_request");
  std::string string_to_sign = str::Cat("AWS4-HMAC-SHA256\n", amz_date, "\n", scope, "\n",
                                            Sha256Hex(CanonicalRequest(request)));
  std::string key = HmacSha256(str::Cat("AWS4", credentials.secret_access_key), date);
  key = HmacSha256(key, region);
  key = HmacSha256(key, service);
  key = HmacSha256(key, "aws4_request");
  std::string signature = HexEncode(HmacSha256(key, string_to_sign));
  return str::Cat("AWS4-HMAC-SHA256 Credential=", credentials.access_key_id, "/", scope,
                      ", SignedHeaders=", SignedHeaders(CanonicalHeaders(request.headers)),
                      ", Signature=", signature);
}

}  // namespace quark::storage
