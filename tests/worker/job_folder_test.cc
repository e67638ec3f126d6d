#include "worker/job_folder.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "tests/storage/support/subprocess.h"

namespace quark::worker {
namespace {

namespace fs = std::filesystem;

// A job folder whose process dies without running its destructor, as under kill -9.
void AbandonInChild(const fs::path& path) {
  pid_t pid = fork();
  if (pid == 0) {
    auto* folder = new JobFolder(path);  // never destroyed: the process ends with the folder and its lock
    std::ofstream(folder->path() / "partial.bin") << "left behind";
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
}

TEST(JobFolderTest, RemovesTheFoldersOfDeadProcessesAndKeepsLiveOnes) {
  quark::testing::TempDir dir;
  const fs::path jobs = dir.path() / "jobs";
  AbandonInChild(jobs / "job-dead");
  ASSERT_TRUE(fs::exists(jobs / "job-dead" / "partial.bin"));
  {
    JobFolder live(jobs / "job-live");
    std::ofstream(live.path() / "model.bin") << "in use";
    EXPECT_EQ(RemoveAbandonedJobFolders(jobs), 1);
    EXPECT_FALSE(fs::exists(jobs / "job-dead"));
    EXPECT_TRUE(fs::exists(live.path() / "model.bin"));  // its lock is held: another worker's running job
  }
  EXPECT_FALSE(fs::exists(jobs / "job-live"));  // removed as its job ended
  EXPECT_EQ(RemoveAbandonedJobFolders(jobs), 0);
}

TEST(JobFolderTest, ANewAttemptStartsEmptyInTheFolderAnEarlierOneLeft) {
  quark::testing::TempDir dir;
  const fs::path path = dir.path() / "jobs" / "job-1";
  AbandonInChild(path);
  JobFolder again(path);
  EXPECT_TRUE(fs::is_directory(again.path()));
  EXPECT_TRUE(fs::is_empty(again.path()));
}

}  // namespace
}  // namespace quark::worker
