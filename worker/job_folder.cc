#include "worker/job_folder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <system_error>

namespace quark::worker {
namespace fs = std::filesystem;
namespace {

// An open, exclusively locked `path` that is still the folder at `path` once locked (another process may remove
// an unlocked folder between our mkdir and flock); -1 when it is not.
int LockFolder(const fs::path& path, bool wait) {
  int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return -1;
  if (flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB)) != 0) {
    close(fd);
    return -1;
  }
  struct stat held {
  }, now{};
  if (fstat(fd, &held) != 0 || lstat(path.c_str(), &now) != 0 || held.st_ino != now.st_ino ||
      held.st_dev != now.st_dev) {
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

JobFolder::JobFolder(fs::path path) : path_(std::move(path)) {
  std::error_code ec;
  for (int tries = 0; tries < 3 && fd_ < 0; ++tries) {
    fs::create_directories(path_, ec);
    fd_ = LockFolder(path_, /*wait=*/true);
  }
  // Held by us now: what an earlier attempt of this job left inside goes, the folder stays (and stays locked).
  for (const auto& entry : fs::directory_iterator(path_, ec)) fs::remove_all(entry.path(), ec);
}

JobFolder::~JobFolder() {
  std::error_code ec;
  fs::remove_all(path_, ec);
  if (fd_ >= 0) close(fd_);
}

int RemoveAbandonedJobFolders(const fs::path& jobs_dir) {
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(jobs_dir, ec)) {
    if (!entry.is_directory(ec) || entry.is_symlink(ec)) continue;
    int fd = LockFolder(entry.path(), /*wait=*/false);
    if (fd < 0) continue;  // a live job's, or already gone
    fs::remove_all(entry.path(), ec);
    close(fd);
    removed += ec ? 0 : 1;
  }
  return removed;
}

}  // namespace quark::worker
