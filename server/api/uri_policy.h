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
  /// or not file:// or s3://, or malformed; PERMISSION_DENIED naming the path when a file:// path (after
  /// resolving "..", "." and symlinks of its existing part) is outside every allowed root.
  absl::Status Check(const std::string& field, const std::string& uri, bool required) const;

  /// The local path of a file:// URI ("" for other schemes).
  static std::string FilePath(const std::string& uri);

  const std::vector<std::string>& roots() const { return roots_; }

 private:
  std::vector<std::string> roots_;
};

}  // namespace quark::server
