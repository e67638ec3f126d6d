#include "server/api/uri_policy.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace quark::server {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxUriBytes = 4096;
constexpr const char kFileScheme[] = "file://";
constexpr const char kS3Scheme[] = "s3://";

// Lexically normal, with symlinks of the existing prefix resolved, so "root/../etc" and a link out of a root
// cannot pass.
std::string Canonical(const std::string& path) {
  std::error_code error;
  fs::path resolved = fs::weakly_canonical(fs::path(path), error);
  if (error) resolved = fs::path(path).lexically_normal();
  std::string out = resolved.lexically_normal().string();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

bool Inside(const std::string& path, const std::string& root) {
  if (root == "/") return true;
  return path == root || (absl::StartsWith(path, root) && path[root.size()] == '/');
}

}  // namespace

UriPolicy::UriPolicy(const std::vector<std::string>& allowed_roots) {
  for (const std::string& root : allowed_roots) {
    if (root.empty()) continue;
    std::error_code error;
    fs::path absolute = fs::absolute(fs::path(root), error);
    roots_.push_back(Canonical(error ? root : absolute.string()));
  }
}

std::string UriPolicy::FilePath(const std::string& uri) {
  return absl::StartsWith(uri, kFileScheme) ? uri.substr(sizeof(kFileScheme) - 1) : std::string();
}

absl::Status UriPolicy::Check(const std::string& field, const std::string& uri, bool required) const {
  if (uri.empty()) {
    return required ? absl::InvalidArgumentError(absl::StrCat(field, ": required (a file:// or s3:// URI)"))
                    : absl::OkStatus();
  }
  if (uri.size() > kMaxUriBytes) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", uri.size(), " bytes, more than ", kMaxUriBytes));
  }
  if (absl::StartsWith(uri, kS3Scheme)) {
    std::string rest = uri.substr(sizeof(kS3Scheme) - 1);
    if (rest.empty() || rest[0] == '/') {
      return absl::InvalidArgumentError(absl::StrCat(field, ": \"", uri, "\" has no bucket (s3://BUCKET/KEY)"));
    }
    return absl::OkStatus();
  }
  if (!absl::StartsWith(uri, kFileScheme)) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": \"", uri, "\" is not a file:// or s3:// URI"));
  }
  std::string path = FilePath(uri);
  if (path.empty() || path[0] != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": \"", uri, "\" needs an absolute path (file:///abs/path)"));
  }
  std::string canonical = Canonical(path);
  for (const std::string& root : roots_) {
    if (Inside(canonical, root)) return absl::OkStatus();
  }
  if (roots_.empty()) {
    return absl::PermissionDeniedError(
        absl::StrCat(field, ": path \"", path, "\" refused: quarkd has no --allowed-roots for file:// URIs"));
  }
  return absl::PermissionDeniedError(absl::StrCat(field, ": path \"", path, "\" is outside the allowed roots [",
                                                  absl::StrJoin(roots_, ", "), "]"));
}

}  // namespace quark::server
