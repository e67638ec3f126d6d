#include "worker/storage/model_cache.h"

#include <gtest/gtest.h>

#include "tests/storage/support/s3_test_base.h"
#include "worker/storage/routing_object_store.h"

namespace quark::storage {
namespace {
namespace fs = std::filesystem;

class ModelCacheTest : public quark::testing::S3TestBase {
 protected:
  std::shared_ptr<ObjectStore> Store() {
    return MakeObjectStore(StorageOptions{{dir_.path() / "models"}, server_->Config()});
  }
  void Upload(ObjectStore& store, const std::string& prefix, int64_t bytes) {
    ASSERT_TRUE(store.PutBytes(prefix + "/config.json", "{}").ok());
    ASSERT_TRUE(store.PutBytes(prefix + "/weights/model.safetensors", std::string(bytes, 'm')).ok());
  }

  quark::testing::TempDir dir_;
};

TEST_F(ModelCacheTest, DownloadsOnceThenHits) {
  std::shared_ptr<ObjectStore> store = Store();
  Upload(*store, "s3://test/cache/m1", 1000);
  ModelCache cache(store, dir_.path() / "cache", 1 << 20);
  int64_t last_done = 0;
  absl::StatusOr<fs::path> local =
      cache.Fetch("s3://test/cache/m1/", [&](int64_t done, int64_t total) {
        last_done = done;
        EXPECT_EQ(total, 1002);
      });
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(last_done, 1002);
  EXPECT_EQ(quark::testing::ReadFile(*local / "config.json"), "{}");
  EXPECT_EQ(fs::file_size(*local / "weights/model.safetensors"), 1000u);
  EXPECT_EQ(cache.UsedBytes(), 1002);

  // A second fetch is a cache hit: the object is gone from the store but the folder is still served.
  ASSERT_TRUE(store->Delete("s3://test/cache/m1/config.json").ok());
  absl::StatusOr<fs::path> again = cache.Fetch("s3://test/cache/m1");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *local);
}

TEST_F(ModelCacheTest, EvictsLeastRecentlyUsed) {
  std::shared_ptr<ObjectStore> store = Store();
  Upload(*store, "s3://test/evict/a", 600);
  Upload(*store, "s3://test/evict/b", 600);
  Upload(*store, "s3://test/evict/c", 100);
  ModelCache cache(store, dir_.path() / "cache", 1300);
  absl::StatusOr<fs::path> a = cache.Fetch("s3://test/evict/a");
  ASSERT_TRUE(a.ok());
  absl::StatusOr<fs::path> c = cache.Fetch("s3://test/evict/c");  // fits beside a
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(cache.Fetch("s3://test/evict/a").ok());  // a is now more recently used than c
  absl::StatusOr<fs::path> b = cache.Fetch("s3://test/evict/b");
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(fs::exists(*c)) << "c was the least recently used";
  EXPECT_TRUE(fs::exists(*a)) << "evicting c made enough room";
  EXPECT_TRUE(fs::exists(*b));
  EXPECT_LE(cache.UsedBytes(), 1300);
}

TEST_F(ModelCacheTest, RefusesModelsLargerThanTheCache) {
  std::shared_ptr<ObjectStore> store = Store();
  Upload(*store, "s3://test/huge/m", 5000);
  ModelCache cache(store, dir_.path() / "cache", 1000);
  absl::StatusOr<fs::path> local = cache.Fetch("s3://test/huge/m");
  EXPECT_EQ(local.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(local.status().message().find("s3://test/huge/m"), std::string::npos);
}

TEST_F(ModelCacheTest, EmptyPrefixIsNotFound) {
  ModelCache cache(Store(), dir_.path() / "cache", 1000);
  absl::StatusOr<fs::path> local = cache.Fetch("s3://test/nothing/here");
  EXPECT_EQ(local.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(local.status().message(), "model_uri: s3://test/nothing/here: no objects under this prefix");
}

TEST_F(ModelCacheTest, FileModelsAreReadInPlaceAndConfined) {
  ModelCache cache(Store(), dir_.path() / "cache", 1000);
  fs::create_directories(dir_.path() / "models/tiny");
  std::string uri = "file://" + (dir_.path() / "models/tiny").string();
  absl::StatusOr<fs::path> local = cache.Fetch(uri);
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(*local, fs::weakly_canonical(dir_.path() / "models/tiny"));

  std::string missing = "file://" + (dir_.path() / "models/none").string();
  EXPECT_EQ(cache.Fetch(missing).status().message(), "model_uri: " + missing + ": no such directory");
  EXPECT_EQ(cache.Fetch("file:///etc").status().code(), absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace quark::storage
