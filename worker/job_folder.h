// A job's temp folder under <work dir>/jobs/<job id>, and the clean-up of folders whose worker died.
#pragma once

#include <filesystem>

namespace quark::worker {

/// Creates `path` empty (removing what an earlier attempt left there) and holds an exclusive flock(2) on it for
/// its lifetime; removes it on destruction, however the job ends. A process killed mid-job (kill -9, OOM) leaves
/// the folder behind but not the lock, which is how RemoveAbandonedJobFolders tells its folders from the live
/// ones of another worker sharing the data dir. If the folder cannot be created or locked, path() still names it
/// and the job's own writes report the error.
class JobFolder {
 public:
  explicit JobFolder(std::filesystem::path path);
  ~JobFolder();
  JobFolder(const JobFolder&) = delete;
  JobFolder& operator=(const JobFolder&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;  // the locked folder, open while the job runs
};

/// Removes every folder in `jobs_dir` that no live JobFolder holds (its flock is free); returns how many. Safe
/// while other processes run jobs in the same folder: a held lock is never taken.
int RemoveAbandonedJobFolders(const std::filesystem::path& jobs_dir);

}  // namespace quark::worker
