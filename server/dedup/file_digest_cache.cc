#include "server/dedup/file_digest_cache.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/base/log.h"
#include "server/log_text.h"
#include "core/base/digest.h"

namespace quark::server {

absl::StatusOr<std::string> FileDigestCache::Sha256Of(int fd, const std::string& label, uint64_t* size) {
  struct stat info;
  if (fstat(fd, &info) != 0) return absl::NotFoundError(absl::StrCat("\"", label, "\": ", std::strerror(errno)));
  if (!S_ISREG(info.st_mode)) return absl::InvalidArgumentError(absl::StrCat("\"", label, "\": not a regular file"));
  const std::pair<uint64_t, uint64_t> id{static_cast<uint64_t>(info.st_dev), static_cast<uint64_t>(info.st_ino)};
  Entry key;
  key.size = static_cast<uint64_t>(info.st_size);
  key.mtime_ns = static_cast<int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec;
  key.ctime_ns = static_cast<int64_t>(info.st_ctim.tv_sec) * 1000000000 + info.st_ctim.tv_nsec;
  if (size != nullptr) *size = key.size;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(id);
    if (it != entries_.end() && it->second.size == key.size && it->second.mtime_ns == key.mtime_ns &&
        it->second.ctime_ns == key.ctime_ns) {
      return it->second.sha256;
    }
  }
  // Reopening the descriptor's /proc link reads the inode it holds, whatever its names are now.
  absl::StatusOr<std::string> digest = quark::Sha256FileHex(absl::StrCat("/proc/self/fd/", fd));
  if (!digest.ok()) return absl::InternalError(absl::StrCat("\"", label, "\": ", digest.status().message()));
  files_hashed_.fetch_add(1);
  log::Get("server")->info("job=- hashed {} ({} bytes) for content keys", ForLog(label), key.size);
  key.sha256 = *digest;
  absl::MutexLock lock(&mu_);
  entries_[id] = std::move(key);
  return *digest;
}

}  // namespace quark::server
