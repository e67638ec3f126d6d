#include "worker/storage/object_uri.h"
#include "worker/storage/strings.h"


namespace quark::storage {

std::string ObjectUri::ToString() const {
  if (scheme == Scheme::kS3) return str::Cat("s3://", bucket, "/", key);
  return str::Cat("file://", key);
}

absl::StatusOr<ObjectUri> ParseObjectUri(std::string_view uri) {
  if (uri.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError(str::Cat("uri: contains a NUL byte: ", uri.substr(0, uri.find('\0'))));
  }
  ObjectUri out;
  if (str::StartsWith(uri, "s3://")) {
    std::string_view rest = uri.substr(5);
    size_t slash = rest.find('/');
    out.scheme = ObjectUri::Scheme::kS3;
    out.bucket = std::string(rest.substr(0, slash));
    if (slash != std::string_view::npos) out.key = std::string(rest.substr(slash + 1));
    if (out.bucket.empty()) return absl::InvalidArgumentError(str::Cat("uri: ", uri, ": empty s3 bucket"));
    return out;
  }
  if (str::StartsWith(uri, "file:")) {
    std::string_view rest = uri.substr(5);
    if (str::StartsWith(rest, "//")) {
      rest.remove_prefix(2);
      if (!rest.empty() && rest.front() != '/') {
        return absl::InvalidArgumentError(
            str::Cat("uri: ", uri, ": file URIs must be local (file:///absolute/path), not file://host/..."));
      }
    }
    if (rest.empty() || rest.front() != '/') {
      return absl::InvalidArgumentError(str::Cat("uri: ", uri, ": file path must be absolute"));
    }
    out.scheme = ObjectUri::Scheme::kFile;
    out.key = std::string(rest);
    return out;
  }
  return absl::InvalidArgumentError(str::Cat("uri: ", uri, ": unsupported scheme (want file:// or s3://)"));
}

std::string JoinUri(std::string_view prefix, std::string_view relative) {
  while (!prefix.empty() && prefix.back() == '/') prefix.remove_suffix(1);
  while (!relative.empty() && relative.front() == '/') relative.remove_prefix(1);
  return str::Cat(prefix, "/", relative);
}

}  // namespace quark::storage
