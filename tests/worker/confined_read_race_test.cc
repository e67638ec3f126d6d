// Attack tests of the file store's reads and writes (issue #29 items 1-2): a tenant swaps a folder it owns for a
// symlink out of the roots while the worker reads or writes below it. The store checks the path, then opens it;
// a walk that follows a symlink swapped in between reads the other folder's file or writes into it.
#include "worker/storage/file_object_store.h"

#include <gtest/gtest.h>

#include "tests/storage/support/subprocess.h"
#include "tests/worker/swap_race.h"

namespace quark::storage {
namespace {
namespace fs = std::filesystem;

// Enough attempts that an unprotected check-then-open loses the race many times over (it did within the first
// few hundred here); each attempt is a few system calls.
constexpr int kAttempts = 20000;

class ConfinedRaceTest : public ::testing::Test {
 protected:
  std::string Uri(const fs::path& path) { return "file://" + path.string(); }

  quark::testing::TempDir dir_;
  fs::path root_ = dir_.path() / "root";
  fs::path victim_ = dir_.path() / "victim";  // another tenant's folder, outside this worker's roots
  FileObjectStore store_{{root_}};
};

TEST_F(ConfinedRaceTest, ReadsNeverFollowAFolderSwappedForASymlink) {
  quark::testing::WriteFile(root_ / "tenant/data/calib.txt", "mine");
  quark::testing::WriteFile(victim_ / "data/calib.txt", "secret");
  quark::testing::FolderSwapper swapper(root_ / "tenant/data", victim_ / "data");
  swapper.Start();
  int read = 0, refused = 0, leaked = 0;
  const std::string uri = Uri(root_ / "tenant/data/calib.txt");
  const fs::path copy = dir_.path() / "copy.txt";
  for (int i = 0; i < kAttempts; ++i) {
    // Half through GetBytes, half through GetFile (a calibration or evaluation file's way in).
    absl::StatusOr<std::string> bytes = store_.GetBytes(uri);
    if (i % 2 == 1) {
      absl::Status status = store_.GetFile(uri, copy);
      bytes = status.ok() ? absl::StatusOr<std::string>(quark::testing::ReadFile(copy)) : status;
    }
    if (!bytes.ok()) {
      ++refused;
      EXPECT_TRUE(bytes.status().code() == absl::StatusCode::kPermissionDenied ||
                  bytes.status().code() == absl::StatusCode::kNotFound)
          << bytes.status();
    } else if (*bytes == "secret") {
      ++leaked;
    } else {
      ++read;
      EXPECT_EQ(*bytes, "mine");
    }
  }
  swapper.Stop();
  EXPECT_EQ(leaked, 0) << "reads of the other tenant's file out of " << kAttempts;
  EXPECT_GT(read, 0);
  EXPECT_GT(refused, 0) << "the swap never landed between a check and a read: the test proved nothing";
}

TEST_F(ConfinedRaceTest, WritesNeverLandInAFolderSwappedForASymlink) {
  fs::create_directories(root_ / "tenant/out");
  fs::create_directories(victim_ / "out");
  quark::testing::FolderSwapper swapper(root_ / "tenant/out", victim_ / "out");
  swapper.Start();
  int written = 0, refused = 0;
  for (int i = 0; i < kAttempts / 4; ++i) {
    std::string name = "artifact-" + std::to_string(i % 8);
    (store_.PutBytes(Uri(root_ / "tenant/out" / name), "forged").ok() ? written : refused)++;
    store_.Delete(Uri(root_ / "tenant/out" / name)).IgnoreError();
  }
  swapper.Stop();
  EXPECT_GT(written, 0);
  EXPECT_GT(refused, 0) << "the folder was never a symlink during a write: the test proved nothing";
  int landed = 0;
  for (const auto& entry : fs::directory_iterator(victim_ / "out")) {
    ADD_FAILURE() << "written outside the roots: " << entry.path();
    ++landed;
  }
  EXPECT_EQ(landed, 0);
}

TEST_F(ConfinedRaceTest, DeletesNeverReachAFolderSwappedForASymlink) {
  fs::create_directories(root_ / "tenant/out");
  quark::testing::WriteFile(victim_ / "out/model.safetensors", "theirs");
  quark::testing::FolderSwapper swapper(root_ / "tenant/out", victim_ / "out");
  swapper.Start();
  int refused = 0;
  for (int i = 0; i < kAttempts / 2; ++i) {
    if (!store_.Delete(Uri(root_ / "tenant/out/model.safetensors")).ok()) ++refused;
  }
  swapper.Stop();
  EXPECT_GT(refused, 0) << "the folder was never a symlink during a delete: the test proved nothing";
  EXPECT_EQ(quark::testing::ReadFile(victim_ / "out/model.safetensors"), "theirs");
}

}  // namespace
}  // namespace quark::storage
