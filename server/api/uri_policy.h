// Which artifact URIs the server accepts: file:// confined to configured roots, and s3://.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace quark::server {

class UriPolicy {
 public:
  /// `allowed_roots`: directories that file:// URIs must lie inside (made absolute and canonical here).
  /// With no roots, every file:// URI is refused.
  explicit UriPolicy(const std::vector<std::string>& allowed_roots);

  /// Checks `uri` of request field `field` ("spec.model_uri"). INVALID_ARGUMENT when empty and `required`,
  /// or not file:// or s3://, or malformed. PERMISSION_DENIED naming the field when:
  ///  - a file:// path (after resolving "..", "." and symlinks of its existing part) is outside every root;
  ///  - the URI holds a percent-encoded '.', '/', '\\' or NUL ("%2e%2e"), a backslash or a control character;
  ///  - an s3:// key is absolute ("s3://bucket//etc") or has "." / ".." / empty segments;
  ///  - an existing file:// target is, or (for a folder) directly holds, a hard-linked file (link count > 1,
  ///    whose other name may lie outside the roots) or a symlink leading outside every root.
  absl::Status Check(const std::string& field, const std::string& uri, bool required) const;

  /// Whether a checked `uri` lies under one of `prefixes` (file:///dir or s3://bucket/prefix, e.g. a tenant's
  /// model_roots). PERMISSION_DENIED "<field>: ... outside <what> [...]" when not; OK for an empty uri.
  static absl::Status CheckScope(const std::string& field, const std::string& uri,
                                 const std::vector<std::string>& prefixes, const std::string& what);

  /// The local path of a file:// URI ("" for other schemes).
  static std::string FilePath(const std::string& uri);

  const std::vector<std::string>& roots() const { return roots_; }

 private:
  std::vector<std::string> roots_;
};

}  // namespace quark::server
