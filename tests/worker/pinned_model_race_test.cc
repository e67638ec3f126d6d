// Attack tests of the model folder read in place (issue #29 items 1-2): the engine reads a tenant's model folder
// by name long after the checks, so the worker pins every file first (PinnedFolder) and the engine reads the
// pinned descriptors. Here a tenant swaps the folder, or a folder inside it, for a symlink to another tenant's
// model before, during and after the pinning.
#include "worker/storage/pinned_folder.h"

#include <gtest/gtest.h>

#include "tests/storage/support/subprocess.h"
#include "tests/worker/swap_race.h"
#include "worker/storage/file_object_store.h"
#include "worker/storage/model_cache.h"

namespace quark::storage {
namespace {
namespace fs = std::filesystem;

class PinnedModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const auto& [folder, text] : {std::pair{root_ / "tenant/model", "mine"}, std::pair{victim_ / "model", "secret"}}) {
      quark::testing::WriteFile(folder / "config.json", std::string(text) + "-config");
      quark::testing::WriteFile(folder / "model.safetensors", std::string(text) + "-weights");
      quark::testing::WriteFile(folder / "sub/tokenizer.model", std::string(text) + "-tokenizer");
    }
  }
  std::string Uri(const fs::path& path) { return "file://" + path.string(); }
  fs::path View(int i) { return dir_.path() / "scratch" / ("view-" + std::to_string(i)); }

  // Every file of the view, checked against the tenant's own bytes; false when any is another tenant's.
  static bool ReadsOnlyMine(const fs::path& view) {
    for (const char* name : {"config.json", "model.safetensors", "sub/tokenizer.model"}) {
      std::string bytes = quark::testing::ReadFile(view / name);
      if (bytes.rfind("mine-", 0) != 0) {
        ADD_FAILURE() << name << " read '" << bytes << "'";
        return false;
      }
    }
    return true;
  }

  struct RaceCount {
    int pinned = 0;
    int refused = 0;
  };
  // Pins the model `attempts` times while `swapper` swaps: every pinned view reads only the tenant's bytes; a refusal
  // ("... is a symlink: ... outside the allowed roots", or "... changed while read" when it was swapped back
  // between the open that met a link and the readlink) is PERMISSION_DENIED or NOT_FOUND.
  RaceCount PinWhileSwapping(quark::testing::FolderSwapper& swapper, int attempts) {
    swapper.Start();
    RaceCount count;
    for (int i = 0; i < attempts; ++i) {
      absl::StatusOr<std::shared_ptr<PinnedFolder>> pin = store_.PinFolder(Uri(root_ / "tenant/model"), View(i));
      if (!pin.ok()) {
        ++count.refused;
        EXPECT_TRUE(pin.status().code() == absl::StatusCode::kPermissionDenied ||
                    pin.status().code() == absl::StatusCode::kNotFound)
            << pin.status();
        continue;
      }
      ++count.pinned;
      if (!ReadsOnlyMine((*pin)->view())) break;
    }
    swapper.Stop();
    return count;
  }

  quark::testing::TempDir dir_;
  fs::path root_ = dir_.path() / "root";
  fs::path victim_ = dir_.path() / "victim";  // another tenant's model, outside this worker's roots
  FileObjectStore store_{{root_}};
};

TEST_F(PinnedModelTest, TheViewKeepsTheCheckedFilesWhateverTheFolderBecomesAfterwards) {
  ModelCache cache(nullptr, dir_.path() / "cache", 1 << 20);
  absl::StatusOr<LocalModel> model = cache.FetchPinned(store_, "", Uri(root_ / "tenant/model"), View(0));
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_NE(model->pinned, nullptr);
  EXPECT_EQ(model->pinned->file_count(), 3u);
  EXPECT_EQ(model->dir, View(0));
  // After the checks: the folder and a folder inside it become symlinks to the other tenant's model.
  fs::rename(root_ / "tenant/model", root_ / "tenant/model.old");
  fs::create_directory_symlink(victim_ / "model", root_ / "tenant/model");
  fs::rename(root_ / "tenant/model.old/sub", root_ / "tenant/model.old/sub.old");
  fs::create_directory_symlink(victim_ / "model/sub", root_ / "tenant/model.old/sub");
  EXPECT_TRUE(ReadsOnlyMine(model->dir));
  model = absl::StatusOr<LocalModel>(absl::CancelledError("done"));
  EXPECT_FALSE(fs::exists(View(0))) << "the view outlived its pin";
}

TEST_F(PinnedModelTest, PinningWhileTheFolderIsSwappedNeverPinsAnotherTenantsFiles) {
  quark::testing::FolderSwapper swapper(root_ / "tenant/model", victim_ / "model");
  const RaceCount count = PinWhileSwapping(swapper, 2000);
  EXPECT_GT(count.pinned, 0);
  EXPECT_GT(count.refused, 0) << "the folder was never a symlink while pinning: the test proved nothing";
}

TEST_F(PinnedModelTest, ASubfolderSwappedWhilePinningNeverPinsAnotherTenantsFiles) {
  // The spare name lies outside the model folder, so only "sub" changes.
  quark::testing::FolderSwapper swapper(root_ / "tenant/model/sub", victim_ / "model/sub", root_ / "tenant/spare");
  const RaceCount count = PinWhileSwapping(swapper, 500);
  EXPECT_GT(count.pinned, 0);
  EXPECT_GT(count.refused, 0) << "sub was never a symlink while pinning: the test proved nothing";
}

TEST_F(PinnedModelTest, SymlinksInsideTheFolderAreFollowedOnlyInsideTheRoots) {
  quark::testing::WriteFile(root_ / "tenant/shared/vocab.txt", "mine-vocab");
  fs::create_symlink("../shared/vocab.txt", root_ / "tenant/model/vocab.txt");
  fs::create_symlink(root_ / "tenant/shared", root_ / "tenant/model/shared");
  absl::StatusOr<std::shared_ptr<PinnedFolder>> pin = store_.PinFolder(Uri(root_ / "tenant/model"), View(0));
  ASSERT_TRUE(pin.ok()) << pin.status();
  EXPECT_EQ(quark::testing::ReadFile((*pin)->view() / "vocab.txt"), "mine-vocab");
  EXPECT_EQ(quark::testing::ReadFile((*pin)->view() / "shared/vocab.txt"), "mine-vocab");

  fs::create_symlink(victim_ / "model/config.json", root_ / "tenant/model/tokenizer.json");
  pin = store_.PinFolder(Uri(root_ / "tenant/model"), View(1));
  EXPECT_EQ(pin.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(pin.status().message().find("tokenizer.json is a symlink"), std::string::npos) << pin.status();
  EXPECT_NE(pin.status().message().find("outside the allowed roots"), std::string::npos) << pin.status();
  EXPECT_FALSE(fs::exists(View(1)));
}

TEST_F(PinnedModelTest, HardLinksAreRefused) {
  fs::create_hard_link(root_ / "tenant/model/config.json", root_ / "tenant/config-alias.json");
  absl::StatusOr<std::shared_ptr<PinnedFolder>> pin = store_.PinFolder(Uri(root_ / "tenant/model"), View(0));
  EXPECT_EQ(pin.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(pin.status().message().find("config.json is a hard link (2 names)"), std::string::npos) << pin.status();
}

}  // namespace
}  // namespace quark::storage
