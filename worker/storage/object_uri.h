// Parsing of the object URIs that jobs name: file:///abs/path and s3://bucket/key.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace quark::storage {

/// One parsed object URI.
struct ObjectUri {
  enum class Scheme { kFile, kS3 };
  Scheme scheme = Scheme::kFile;
  /// s3 only: the bucket name.
  std::string bucket;
  /// s3: the object key, without a leading '/'; file: the absolute path (always starts with '/').
  std::string key;

  /// The URI again, in canonical spelling ("file:///a/b", "s3://bucket/key").
  std::string ToString() const;
};

/// Parses `uri`. INVALID_ARGUMENT naming the URI for an unknown scheme, a relative file path, an empty s3 bucket
/// or a NUL byte. "file:/a" and "file:///a" are both accepted; file://host/... is refused (only local files).
absl::StatusOr<ObjectUri> ParseObjectUri(std::string_view uri);

/// `prefix` + "/" + `relative`, with exactly one '/' between them ("s3://b/out" + "j1/a.bin" = "s3://b/out/j1/a.bin").
std::string JoinUri(std::string_view prefix, std::string_view relative);

}  // namespace quark::storage
