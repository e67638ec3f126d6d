#include "server/dedup/file_digest_cache.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/base/log.h"
#include "server/log_text.h"
#include "core/base/digest.h"

namespace quark::server {

absl::StatusOr<std::string> FileDigestCache::Sha256(const std::string& path, uint64_t* size) {
  struct stat info;
  if (stat(path.c_str(), &info) != 0) {
    return absl::NotFoundError(absl::StrCat("\"", path, "\": ", std::strerror(errno)));
  }
  if (!S_ISREG(info.st_mode)) return absl::InvalidArgumentError(absl::StrCat("\"", path, "\": not a regular file"));
  Entry key;
  key.size = static_cast<uint64_t>(info.st_size);
  key.mtime_ns = static_cast<int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec;
  if (size != nullptr) *size = key.size;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(path);
    if (it != entries_.end() && it->second.size == key.size && it->second.mtime_ns == key.mtime_ns) {
      return it->second.sha256;
    }
  }
  absl::StatusOr<std::string> digest = quark::Sha256FileHex(path);
  if (!digest.ok()) return digest.status();
  files_hashed_.fetch_add(1);
  log::Get("server")->info("job=- hashed {} ({} bytes) for content keys", ForLog(path), key.size);
  key.sha256 = *digest;
  absl::MutexLock lock(&mu_);
  entries_[path] = std::move(key);
  return *digest;
}

}  // namespace quark::server
