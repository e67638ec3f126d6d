#include "worker/storage/publish.h"

#include <gtest/gtest.h>

#include "tests/storage/support/s3_test_base.h"
#include "core/base/digest.h"
#include "worker/storage/file_object_store.h"
#include "worker/storage/s3_object_store.h"

namespace quark::storage {
namespace {
namespace fs = std::filesystem;

void MakeArtifact(const fs::path& dir) {
  quark::testing::WriteFile(dir / "config.json", R"({"model_type":"llama"})");
  quark::testing::WriteFile(dir / "model.safetensors", std::string(4099, 'w'));
  quark::testing::WriteFile(dir / "tokenizer/tokenizer.model", "tok");
}

ManifestInfo Info() {
  ManifestInfo info;
  info.job_id = "job-1";
  info.config = {{"global_quant_config", {{"weight", {{"dtype", "int4"}}}}}};
  info.metrics = {{"ppl_after", 12.5}, {"seconds_total", 3.0}};
  info.extra = {{"model_uri", "file:///models/x"}};
  return info;
}

TEST(PublishTest, FileStoreWritesFilesThenManifest) {
  quark::testing::TempDir dir;
  MakeArtifact(dir.path() / "artifact");
  FileObjectStore store({dir.path() / "out"});
  std::string prefix = "file://" + (dir.path() / "out/job-1").string();
  std::vector<int> done;
  absl::StatusOr<PublishResult> result = PublishArtifacts(
      store, dir.path() / "artifact", prefix, Info(), [&](int files, int total, int64_t, int64_t) {
        done.push_back(files);
        EXPECT_EQ(total, 3);
      });
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(done, (std::vector<int>{1, 2, 3}));
  ASSERT_EQ(result->files.size(), 3u);
  EXPECT_EQ(result->files[2].path, "tokenizer/tokenizer.model");
  EXPECT_EQ(result->files[1].uri, prefix + "/model.safetensors");
  EXPECT_EQ(result->files[1].sha256, Sha256Hex(std::string(4099, 'w')));
  EXPECT_EQ(result->manifest_uri, prefix + "/manifest.json");
  EXPECT_EQ(result->manifest_sha256, Sha256Hex(*store.GetBytes(result->manifest_uri)));  // #29 verified dedup

  nlohmann::json manifest = nlohmann::json::parse(*store.GetBytes(result->manifest_uri));
  EXPECT_EQ(manifest["format_version"], 1);
  EXPECT_EQ(manifest["job_id"], "job-1");
  EXPECT_EQ(manifest["model_uri"], "file:///models/x");
  EXPECT_EQ(manifest["files"].size(), 3u);
  EXPECT_EQ(manifest["files"][1]["size_bytes"], 4099);
  EXPECT_EQ(manifest["files"][1]["sha256"], result->files[1].sha256);
  EXPECT_EQ(manifest["metrics"]["ppl_after"], 12.5);
  EXPECT_EQ(manifest["config"]["global_quant_config"]["weight"]["dtype"], "int4");
  EXPECT_TRUE(manifest.contains("created_at"));
  EXPECT_EQ(*store.GetBytes(prefix + "/tokenizer/tokenizer.model"), "tok");
}

TEST(PublishTest, RefusesOwnManifestAndMissingDir) {
  quark::testing::TempDir dir;
  quark::testing::WriteFile(dir.path() / "a/manifest.json", "{}");
  FileObjectStore store({dir.path()});
  std::string prefix = "file://" + (dir.path() / "out").string();
  EXPECT_EQ(PublishArtifacts(store, dir.path() / "a", prefix, Info()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PublishArtifacts(store, dir.path() / "none", prefix, Info()).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(PublishTest, CancelledBetweenFilesWritesNoManifest) {
  quark::testing::TempDir dir;
  MakeArtifact(dir.path() / "artifact");
  FileObjectStore store({dir.path()});
  std::string prefix = "file://" + (dir.path() / "out").string();
  int polls = 0;
  absl::StatusOr<PublishResult> result =
      PublishArtifacts(store, dir.path() / "artifact", prefix, Info(), {}, [&] { return ++polls > 1; });
  EXPECT_EQ(result.status().code(), absl::StatusCode::kCancelled);
  EXPECT_FALSE(fs::exists(dir.path() / "out/manifest.json"));
}

class PublishS3Test : public quark::testing::S3TestBase {};

TEST_F(PublishS3Test, LandsInBucketWithManifest) {
  quark::testing::TempDir dir;
  MakeArtifact(dir.path() / "artifact");
  S3ObjectStore store(server_->Config());
  absl::StatusOr<PublishResult> result =
      PublishArtifacts(store, dir.path() / "artifact", "s3://test/publish/job-1", Info());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->manifest_uri, "s3://test/publish/job-1/manifest.json");
  absl::StatusOr<std::vector<ObjectInfo>> list = store.List("s3://test/publish/job-1");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), 4u);
  nlohmann::json manifest = nlohmann::json::parse(*store.GetBytes(result->manifest_uri));
  for (const auto& file : manifest["files"]) {
    absl::StatusOr<std::string> bytes = store.GetBytes("s3://test/publish/job-1/" + file["path"].get<std::string>());
    ASSERT_TRUE(bytes.ok());
    EXPECT_EQ(Sha256Hex(*bytes), file["sha256"]);
  }
}

TEST_F(PublishS3Test, RetriedErrorsStillPublish) {
  absl::StatusOr<std::unique_ptr<quark::testing::FaultProxy>> proxy = quark::testing::FaultProxy::Start(
      server_->endpoint(), R"([{"method":"PUT","path":"model.safetensors","status":503,"times":2},
                              {"method":"PUT","path":"manifest.json","status":500,"times":1}])");
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  quark::testing::TempDir dir;
  MakeArtifact(dir.path() / "artifact");
  S3ObjectStore store(quark::testing::S3rver::ConfigFor((*proxy)->endpoint()));
  absl::StatusOr<PublishResult> result =
      PublishArtifacts(store, dir.path() / "artifact", "s3://test/publish-retried/job-1", Info());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(store.Head(result->manifest_uri).ok());
  EXPECT_EQ((*proxy)->CountLines("fault PUT"), 3);
}

TEST_F(PublishS3Test, FailedFileMeansNoManifest) {
  absl::StatusOr<std::unique_ptr<quark::testing::FaultProxy>> proxy = quark::testing::FaultProxy::Start(
      server_->endpoint(), R"([{"method":"PUT","path":"model.safetensors","status":503,"times":-1}])");
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  quark::testing::TempDir dir;
  MakeArtifact(dir.path() / "artifact");
  S3Config config = quark::testing::S3rver::ConfigFor((*proxy)->endpoint());
  config.max_attempts = 3;
  S3ObjectStore store(config);
  // An earlier attempt's manifest must not survive a failed re-publish either.
  ASSERT_TRUE(store.PutBytes("s3://test/publish-failed/job-1/manifest.json", "{}").ok());
  absl::StatusOr<PublishResult> result =
      PublishArtifacts(store, dir.path() / "artifact", "s3://test/publish-failed/job-1", Info());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(result.status().message().find("model.safetensors"), std::string::npos) << result.status();
  S3ObjectStore direct(server_->Config());
  EXPECT_EQ(direct.Head("s3://test/publish-failed/job-1/manifest.json").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ((*proxy)->CountLines("fault PUT"), 3);
}

}  // namespace
}  // namespace quark::storage
