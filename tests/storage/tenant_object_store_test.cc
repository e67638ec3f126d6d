// A job's store held to its tenant's roots inside the worker's own (issue #29 items 1-2): tenants a and b share one
// worker root; everything of b's that a's job reaches through a symlink, lexically or by a swap, is refused.
#include "worker/storage/tenant_object_store.h"

#include <gtest/gtest.h>

#include "tests/storage/support/subprocess.h"
#include "worker/storage/pinned_folder.h"
#include "worker/storage/routing_object_store.h"

namespace quark::storage {
namespace {
namespace fs = std::filesystem;

class TenantObjectStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* tenant : {"a", "b"}) {
      quark::testing::WriteFile(Path(tenant) / "models/m/config.json", std::string("{\"owner\": \"") + tenant + "\"}");
      fs::create_directories(Path(tenant) / "out");
    }
  }
  fs::path Path(const std::string& relative) const { return worker_root_ / relative; }
  std::string Uri(const std::string& relative) const { return "file://" + Path(relative).string(); }
  TenantRoots RootsOfA() const { return {{Uri("a/models"), "s3://bucket/a-in/"}, {Uri("a/out"), "s3://bucket/a-out"}}; }
  // The worker's own store over the whole root, without S3 (an s3:// URI reaching it fails FAILED_PRECONDITION).
  std::shared_ptr<ObjectStore> WorkerStore() const {
    return std::make_shared<RoutingObjectStore>(std::make_unique<FileObjectStore>(std::vector<fs::path>{worker_root_}),
                                                nullptr);
  }

  quark::testing::TempDir dir_;
  fs::path worker_root_ = fs::weakly_canonical(dir_.path()) / "root";
};

TEST_F(TenantObjectStoreTest, ReadsAndWritesInsideTheTenantsRootsPass) {
  TenantObjectStore store(WorkerStore(), RootsOfA(), {worker_root_});
  absl::StatusOr<std::string> config = store.GetBytes(Uri("a/models/m/config.json"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(*config, "{\"owner\": \"a\"}");
  ASSERT_TRUE(store.PutBytes(Uri("a/out/job/x.bin"), "x").ok());
  absl::StatusOr<ObjectInfo> head = store.Head(Uri("a/out/job/x.bin"));
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(head->size_bytes, 1);
  ASSERT_TRUE(store.Delete(Uri("a/out/job/x.bin")).ok());
  absl::StatusOr<std::shared_ptr<PinnedFolder>> pinned = store.PinFolder(Uri("a/models/m"), dir_.path() / "view");
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  // s3:// URIs under the tenant's prefixes reach the inner store (which has no S3 here).
  EXPECT_EQ(store.GetBytes("s3://bucket/a-in/calib.txt").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store.PutBytes("s3://bucket/a-out/j/x", "x").code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(TenantObjectStoreTest, AnotherTenantsUrisAreRefusedNamingTheTenantsRoots) {
  TenantObjectStore store(WorkerStore(), RootsOfA(), {worker_root_});
  absl::Status read = store.GetBytes(Uri("b/models/m/config.json")).status();
  EXPECT_EQ(read.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(read.message().find(Uri("a/models")), std::string::npos) << read;
  EXPECT_EQ(store.GetBytes(Uri("a/models/../../b/models/m/config.json")).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(store.PutBytes(Uri("b/out/x"), "x").code(), absl::StatusCode::kPermissionDenied);
  // A tenant may not write into its model roots, nor read another bucket or a prefix that only starts alike.
  EXPECT_EQ(store.PutBytes(Uri("a/models/m/config.json"), "x").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(store.GetBytes("s3://bucket/b-in/calib.txt").status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(store.GetBytes("s3://other/a-in/calib.txt").status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(store.PutBytes("s3://bucket/a-out2/x", "x").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(store.List("s3://bucket/a-in/../b-in").status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_FALSE(fs::exists(Path("b/out/x")));
  EXPECT_EQ(store.CheckWrite("spec.output_uri", Uri("b/out")).message().substr(0, 16), "spec.output_uri:");
}

TEST_F(TenantObjectStoreTest, SymlinksAndSwapsIntoAnotherTenantsRootAreNotFollowed) {
  TenantObjectStore store(WorkerStore(), RootsOfA(), {worker_root_});
  // A folder of a's that is a symlink to b's model (inside the worker's roots: the worker's store follows it).
  fs::create_directory_symlink(Path("b/models/m"), Path("a/models/linked"));
  ASSERT_TRUE(WorkerStore()->GetBytes(Uri("a/models/linked/config.json")).ok());
  EXPECT_EQ(store.GetBytes(Uri("a/models/linked/config.json")).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(store.PinFolder(Uri("a/models/linked"), dir_.path() / "v1").status().code(),
            absl::StatusCode::kPermissionDenied);
  // A real folder of a's whose file is a symlink to b's file.
  fs::create_directories(Path("a/models/mixed"));
  fs::create_symlink(Path("b/models/m/config.json"), Path("a/models/mixed/config.json"));
  EXPECT_EQ(store.PinFolder(Uri("a/models/mixed"), dir_.path() / "v2").status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(store.LocalPath(Uri("a/models/mixed")).status().code(), absl::StatusCode::kPermissionDenied);
  // a's output folder swapped for a symlink into b's output prefix: nothing is written there.
  fs::create_directory_symlink(Path("b/out"), Path("a/out/job"));
  absl::Status write = store.PutBytes(Uri("a/out/job/model.safetensors"), "stolen");
  EXPECT_EQ(write.code(), absl::StatusCode::kPermissionDenied) << write;
  EXPECT_EQ(store.Delete(Uri("a/out/job/anything")).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(fs::is_empty(Path("b/out")));
}

TEST_F(TenantObjectStoreTest, TenantRootsAreClippedToTheWorkersRoots) {
  // A tenant root above the worker's root gives the worker's root; one beside it gives nothing.
  std::vector<fs::path> clipped = ClipFileRoots({"file:///", Uri("a/models"), "file:///etc", "s3://bucket/x"},
                                                {worker_root_});
  EXPECT_EQ(clipped, (std::vector<fs::path>{worker_root_, Path("a/models")}));
  TenantObjectStore store(WorkerStore(), TenantRoots{{"file:///etc"}, {}}, {worker_root_});
  EXPECT_TRUE(store.read_folders().empty());
  absl::Status status = store.GetBytes("file:///etc/hostname").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << status;
}

TEST_F(TenantObjectStoreTest, AnEmptyListLeavesThatSideToTheWorkersRoots) {
  // Output prefixes only: reads are the worker's (b's model is inside its roots), writes the tenant's.
  TenantObjectStore store(WorkerStore(), TenantRoots{{}, {Uri("a/out")}}, {worker_root_});
  EXPECT_TRUE(store.GetBytes(Uri("b/models/m/config.json")).ok());
  EXPECT_EQ(store.PutBytes(Uri("b/out/x"), "x").code(), absl::StatusCode::kPermissionDenied);
  ASSERT_TRUE(store.PutBytes(Uri("a/out/x"), "x").ok());
  // Publish reads back the size of what it wrote.
  EXPECT_TRUE(store.Head(Uri("a/out/x")).ok());
  // Model roots only: writes are the worker's, and so is the size of what was written.
  TenantObjectStore reader(WorkerStore(), TenantRoots{{Uri("a/models")}, {}}, {worker_root_});
  EXPECT_EQ(reader.GetBytes(Uri("b/models/m/config.json")).status().code(), absl::StatusCode::kPermissionDenied);
  ASSERT_TRUE(reader.PutBytes(Uri("b/out/y"), "yy").ok());
  absl::StatusOr<ObjectInfo> head = reader.Head(Uri("b/out/y"));
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(head->size_bytes, 2);
}

}  // namespace
}  // namespace quark::storage
