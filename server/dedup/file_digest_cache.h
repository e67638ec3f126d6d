// SHA-256 of files the server reads to build content keys (model weights, calibration and evaluation text),
// remembered by (device and inode, size, mtime and ctime in ns) so a multi-GB model is hashed once per quarkd process,
// not per submit.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <utility>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace quark::server {

/// Thread-safe. Files are hashed outside the lock: two submits of different models hash in parallel (the same
/// file asked for twice at once may be hashed twice; both give the same digest).
class FileDigestCache {
 public:
  /// Lower-case hex SHA-256 of the open regular file `fd` (read through its descriptor, never by a name, so
  /// callers open it inside the caller's roots first), with its size; `label` (its path) names it in the log and
  /// errors. Remembered by device and inode, so a file reached by another name (a pinned view) is not hashed again.
  /// Any write or utimes() moves the inode's ctime, which no caller can set back, so a file rewritten in place is
  /// hashed again even with its size and mtime restored (#29: dedup re-checks published artifacts with this cache).
  /// NOT_FOUND / INVALID_ARGUMENT / INTERNAL naming `label`.
  absl::StatusOr<std::string> Sha256Of(int fd, const std::string& label, uint64_t* size = nullptr);

  /// Files actually read and hashed so far (cache misses): the tests count re-hashing with it.
  int64_t files_hashed() const { return files_hashed_.load(); }

 private:
  struct Entry {
    uint64_t size = 0;
    int64_t mtime_ns = 0;
    int64_t ctime_ns = 0;
    std::string sha256;
  };

  absl::Mutex mu_;
  std::map<std::pair<uint64_t, uint64_t>, Entry> entries_ ABSL_GUARDED_BY(mu_);  // (device, inode) -> digest
  std::atomic<int64_t> files_hashed_{0};
};

}  // namespace quark::server
