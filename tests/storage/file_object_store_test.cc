#include "worker/storage/file_object_store.h"

#include <gtest/gtest.h>

#include "tests/storage/support/subprocess.h"

namespace quark::storage {
namespace {
namespace fs = std::filesystem;

class FileObjectStoreTest : public ::testing::Test {
 protected:
  std::string Uri(const fs::path& path) { return "file://" + path.string(); }

  quark::testing::TempDir dir_;
  fs::path root_ = dir_.path() / "root";
  fs::path outside_ = dir_.path() / "outside";
  FileObjectStore store_{{root_}};
};

TEST_F(FileObjectStoreTest, PutGetHeadListDelete) {
  ASSERT_TRUE(store_.PutBytes(Uri(root_ / "a/b/one.txt"), "hello").ok());
  quark::testing::WriteFile(dir_.path() / "local.bin", std::string(1025, 'x'));
  ASSERT_TRUE(store_.PutFile(Uri(root_ / "a/two.bin"), dir_.path() / "local.bin").ok());

  absl::StatusOr<std::string> bytes = store_.GetBytes(Uri(root_ / "a/b/one.txt"));
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, "hello");
  absl::StatusOr<ObjectInfo> info = store_.Head(Uri(root_ / "a/two.bin"));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->size_bytes, 1025);

  absl::StatusOr<std::vector<ObjectInfo>> list = store_.List(Uri(root_ / "a"));
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].uri, Uri(fs::weakly_canonical(root_) / "a/b/one.txt"));
  EXPECT_EQ((*list)[1].size_bytes, 1025);
  // No temp files are left beside the targets.
  EXPECT_EQ(std::distance(fs::directory_iterator(root_ / "a"), fs::directory_iterator()), 2);

  ASSERT_TRUE(store_.GetFile(Uri(root_ / "a/two.bin"), dir_.path() / "copy/two.bin").ok());
  EXPECT_EQ(fs::file_size(dir_.path() / "copy/two.bin"), 1025u);
  ASSERT_TRUE(store_.Delete(Uri(root_ / "a/two.bin")).ok());
  ASSERT_TRUE(store_.Delete(Uri(root_ / "a/two.bin")).ok());  // deleting twice is fine
  EXPECT_EQ(store_.Head(Uri(root_ / "a/two.bin")).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_.GetBytes(Uri(root_ / "missing")).status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<std::vector<ObjectInfo>> empty = store_.List(Uri(root_ / "nothing-here"));
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST_F(FileObjectStoreTest, OverwriteReplacesWholeObject) {
  ASSERT_TRUE(store_.PutBytes(Uri(root_ / "f"), std::string(100, 'a')).ok());
  ASSERT_TRUE(store_.PutBytes(Uri(root_ / "f"), "b").ok());
  EXPECT_EQ(*store_.GetBytes(Uri(root_ / "f")), "b");
}

TEST_F(FileObjectStoreTest, DotDotEscapeIsDenied) {
  fs::create_directories(outside_);
  for (const std::string& uri : {Uri(root_) + "/../outside/x", Uri(root_) + "/a/../../outside/x", Uri(outside_ / "x"),
                                 std::string("file:///etc/passwd")}) {
    absl::Status put = store_.PutBytes(uri, "x");
    EXPECT_EQ(put.code(), absl::StatusCode::kPermissionDenied) << uri;
    EXPECT_NE(put.message().find(uri), std::string::npos) << put.message();
    EXPECT_EQ(store_.GetBytes(uri).status().code(), absl::StatusCode::kPermissionDenied) << uri;
  }
  EXPECT_FALSE(fs::exists(outside_ / "x"));
  // ".." that stays inside the root is fine.
  EXPECT_TRUE(store_.PutBytes(Uri(root_) + "/a/../inside", "x").ok());
}

TEST_F(FileObjectStoreTest, SymlinksOutOfTheRootAreDenied) {
  fs::create_directories(outside_);
  quark::testing::WriteFile(outside_ / "secret", "s");
  fs::create_directories(root_);
  fs::create_directory_symlink(outside_, root_ / "link-dir");
  fs::create_symlink(outside_ / "secret", root_ / "link-file");

  EXPECT_EQ(store_.GetBytes(Uri(root_ / "link-file")).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(store_.GetBytes(Uri(root_ / "link-dir/secret")).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(store_.PutBytes(Uri(root_ / "link-dir/new"), "x").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_FALSE(fs::exists(outside_ / "new"));
  EXPECT_EQ(store_.LocalPath(Uri(root_ / "link-dir")).status().code(), absl::StatusCode::kPermissionDenied);

  // A symlink that stays inside the root resolves.
  quark::testing::WriteFile(root_ / "real/file", "r");
  fs::create_directory_symlink(root_ / "real", root_ / "alias");
  EXPECT_EQ(*store_.GetBytes(Uri(root_ / "alias/file")), "r");
}

// quarkd checks links at submit; the folder can change before the worker reads it, so every read checks again.
TEST_F(FileObjectStoreTest, HardLinksAndSymlinksSwappedInAfterSubmitAreRefusedAtRead) {
  fs::create_directories(outside_);
  quark::testing::WriteFile(outside_ / "secret", "s");
  quark::testing::WriteFile(root_ / "model/config.json", "{}");
  quark::testing::WriteFile(root_ / "model/weights.bin", "w");
  quark::testing::WriteFile(root_ / "calib.txt", "c");
  ASSERT_TRUE(store_.LocalPath(Uri(root_ / "model")).ok());
  ASSERT_EQ(*store_.GetBytes(Uri(root_ / "calib.txt")), "c");

  // A hard link: the same inode may be named outside the roots (here its other name is inside, which is
  // enough to refuse: the worker cannot tell).
  fs::create_hard_link(root_ / "calib.txt", root_ / "calib-alias.txt");
  for (const std::string& uri : {Uri(root_ / "calib.txt"), Uri(root_ / "calib-alias.txt")}) {
    absl::StatusOr<std::string> bytes = store_.GetBytes(uri);
    EXPECT_EQ(bytes.status().code(), absl::StatusCode::kPermissionDenied) << uri;
    EXPECT_NE(bytes.status().message().find("is a hard link (2 names)"), std::string::npos) << bytes.status();
    EXPECT_EQ(store_.GetFile(uri, dir_.path() / "copy.txt").code(), absl::StatusCode::kPermissionDenied);
  }
  EXPECT_FALSE(fs::exists(dir_.path() / "copy.txt"));

  // A hard-linked weights file inside a model folder read in place.
  fs::remove(root_ / "model/weights.bin");
  fs::create_hard_link(root_ / "calib.txt", root_ / "model/weights.bin");
  absl::StatusOr<fs::path> local = store_.LocalPath(Uri(root_ / "model"));
  EXPECT_EQ(local.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(local.status().message().find("model/weights.bin is a hard link"), std::string::npos) << local.status();

  // A symlink out of the roots swapped into the model folder after submit, also one folder down.
  fs::remove(root_ / "model/weights.bin");
  quark::testing::WriteFile(root_ / "model/weights.bin", "w");
  ASSERT_TRUE(store_.LocalPath(Uri(root_ / "model")).ok());
  fs::create_directories(root_ / "model/sub");
  fs::create_symlink(outside_ / "secret", root_ / "model/sub/tokenizer.model");
  local = store_.LocalPath(Uri(root_ / "model"));
  EXPECT_EQ(local.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(local.status().message().find("sub/tokenizer.model is a symlink to " + fs::weakly_canonical(outside_).string()),
            std::string::npos)
      << local.status();
  // A symlink that stays inside the roots is fine.
  fs::remove(root_ / "model/sub/tokenizer.model");
  fs::create_symlink(root_ / "model/config.json", root_ / "model/sub/config-alias.json");
  EXPECT_TRUE(store_.LocalPath(Uri(root_ / "model")).ok());
}

TEST_F(FileObjectStoreTest, EmptyRootListAllowsNothing) {
  FileObjectStore none({});
  EXPECT_EQ(none.PutBytes(Uri(root_ / "x"), "x").code(), absl::StatusCode::kPermissionDenied);
}

TEST_F(FileObjectStoreTest, RejectsOtherSchemes) {
  EXPECT_EQ(store_.PutBytes("s3://b/k", "x").code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace quark::storage
