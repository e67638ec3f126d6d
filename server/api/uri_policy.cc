#include "server/api/uri_policy.h"

#include <sys/stat.h>

#include <filesystem>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
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

constexpr int kMaxScannedEntries = 10000;

// Percent escapes of the characters that make paths ('.', '/', '\\', NUL), backslashes and control characters:
// nothing in quarkd decodes URIs, but a store or tool further down might.
absl::Status CheckCharacters(const std::string& field, const std::string& uri) {
  for (size_t i = 0; i < uri.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(uri[i]);
    if (c < 0x20 || c == 0x7f || c == '\\') {
      return absl::PermissionDeniedError(
          absl::StrCat(field, ": a backslash or control character (byte ", static_cast<int>(c), " at ", i, ") is refused"));
    }
    if (c == '%' && i + 2 < uri.size()) {
      std::string escape = absl::AsciiStrToLower(uri.substr(i, 3));
      if (escape == "%2e" || escape == "%2f" || escape == "%5c" || escape == "%00") {
        return absl::PermissionDeniedError(absl::StrCat(field, ": \"", uri, "\" holds the percent escape ",
                                                        uri.substr(i, 3), " (encoded '.', '/', '\\\\' or NUL are refused)"));
      }
    }
  }
  return absl::OkStatus();
}

// s3://BUCKET/KEY: the key must be relative and made of plain segments.
absl::Status CheckS3Key(const std::string& field, const std::string& uri, const std::string& rest) {
  size_t slash = rest.find('/');
  if (slash == std::string::npos) return absl::OkStatus();  // a bucket alone
  std::string key = rest.substr(slash + 1);
  if (!key.empty() && key[0] == '/') {
    return absl::PermissionDeniedError(absl::StrCat(field, ": \"", uri, "\" has an absolute object key"));
  }
  std::vector<std::string> segments = absl::StrSplit(key, '/');
  for (size_t i = 0; i < segments.size(); ++i) {
    const std::string& segment = segments[i];
    bool last = i + 1 == segments.size();
    if (segment == "." || segment == ".." || (segment.empty() && !last)) {
      return absl::PermissionDeniedError(absl::StrCat(field, ": \"", uri, "\" has a \"", segment,
                                                      "\" segment in its object key"));
    }
  }
  return absl::OkStatus();
}

// A hard-linked regular file (link count > 1) or a symlink leading out of every root, at `path` or directly in
// the folder `path`.
absl::Status CheckLinks(const std::string& field, const std::string& path, const std::vector<std::string>& roots) {
  auto check_one = [&](const fs::path& entry) -> absl::Status {
    struct stat info {};
    if (lstat(entry.c_str(), &info) != 0) return absl::OkStatus();
    if (S_ISLNK(info.st_mode)) {
      std::string target = Canonical(entry.string());
      bool inside = false;
      for (const std::string& root : roots) inside = inside || Inside(target, root);
      if (!inside) {
        return absl::PermissionDeniedError(
            absl::StrCat(field, ": \"", entry.string(), "\" is a symlink to \"", target, "\", outside the allowed roots"));
      }
      if (stat(entry.c_str(), &info) != 0) return absl::OkStatus();
    }
    if (S_ISREG(info.st_mode) && info.st_nlink > 1) {
      return absl::PermissionDeniedError(absl::StrCat(field, ": \"", entry.string(), "\" is a hard link (", info.st_nlink,
                                                      " names); copy the file instead"));
    }
    return absl::OkStatus();
  };
  std::string canonical = Canonical(path);
  absl::Status status = check_one(canonical);
  if (!status.ok()) return status;
  std::error_code error;
  if (!fs::is_directory(canonical, error)) return absl::OkStatus();
  int scanned = 0;
  for (fs::directory_iterator it(canonical, error), end; !error && it != end && scanned < kMaxScannedEntries;
       it.increment(error), ++scanned) {
    status = check_one(it->path());
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
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
  absl::Status status = CheckCharacters(field, uri);
  if (!status.ok()) return status;
  if (absl::StartsWith(uri, kS3Scheme)) {
    std::string rest = uri.substr(sizeof(kS3Scheme) - 1);
    if (rest.empty() || rest[0] == '/') {
      return absl::InvalidArgumentError(absl::StrCat(field, ": \"", uri, "\" has no bucket (s3://BUCKET/KEY)"));
    }
    return CheckS3Key(field, uri, rest);
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
    if (Inside(canonical, root)) return CheckLinks(field, path, roots_);
  }
  if (roots_.empty()) {
    return absl::PermissionDeniedError(
        absl::StrCat(field, ": path \"", path, "\" refused: quarkd has no --allowed-roots for file:// URIs"));
  }
  return absl::PermissionDeniedError(absl::StrCat(field, ": path \"", path, "\" is outside the allowed roots [",
                                                  absl::StrJoin(roots_, ", "), "]"));
}

absl::Status UriPolicy::CheckScope(const std::string& field, const std::string& uri,
                                   const std::vector<std::string>& prefixes, const std::string& what) {
  if (uri.empty()) return absl::OkStatus();
  std::string path = FilePath(uri);
  std::string canonical = path.empty() ? std::string() : Canonical(path);
  for (const std::string& prefix : prefixes) {
    if (!path.empty()) {
      std::string root = FilePath(prefix);
      if (!root.empty() && Inside(canonical, Canonical(root))) return absl::OkStatus();
      continue;
    }
    if (!absl::StartsWith(prefix, kS3Scheme) || !absl::StartsWith(uri, prefix)) continue;
    if (uri.size() == prefix.size() || prefix.back() == '/' || uri[prefix.size()] == '/') return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat(field, ": \"", uri, "\" is outside ", what, " [",
                                                  absl::StrJoin(prefixes, ", "), "]"));
}

}  // namespace quark::server
