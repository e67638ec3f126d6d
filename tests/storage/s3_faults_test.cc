// The S3 client against a proxy that injects 5xx answers and connection resets in front of a real s3rver.
#include <gtest/gtest.h>

#include "tests/storage/support/s3_test_base.h"
#include "worker/storage/s3_object_store.h"

namespace quark::storage {
namespace {

class S3FaultsTest : public quark::testing::S3TestBase {
 protected:
  std::unique_ptr<quark::testing::FaultProxy> Proxy(const std::string& rules) {
    absl::StatusOr<std::unique_ptr<quark::testing::FaultProxy>> proxy =
        quark::testing::FaultProxy::Start(server_->endpoint(), rules);
    EXPECT_TRUE(proxy.ok()) << proxy.status();
    return proxy.ok() ? std::move(*proxy) : nullptr;
  }
};

TEST_F(S3FaultsTest, Retries5xxThenSucceeds) {
  auto proxy = Proxy(R"([{"method":"PUT","path":"faults/a","status":503,"times":2},
                         {"method":"GET","path":"faults/a","status":500,"times":1}])");
  ASSERT_NE(proxy, nullptr);
  S3ObjectStore store(quark::testing::S3rver::ConfigFor(proxy->endpoint()));
  ASSERT_TRUE(store.PutBytes("s3://test/faults/a", "payload").ok());
  absl::StatusOr<std::string> back = store.GetBytes("s3://test/faults/a");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, "payload");
  EXPECT_EQ(proxy->CountLines("fault PUT"), 2) << proxy->Log();
  EXPECT_EQ(proxy->CountLines("fault GET"), 1) << proxy->Log();
}

TEST_F(S3FaultsTest, RetriesConnectionResets) {
  auto proxy = Proxy(R"([{"method":"PUT","path":"faults/reset","reset":true,"times":2}])");
  ASSERT_NE(proxy, nullptr);
  S3ObjectStore store(quark::testing::S3rver::ConfigFor(proxy->endpoint()));
  absl::Status status = store.PutBytes("s3://test/faults/reset", "payload");
  EXPECT_TRUE(status.ok()) << status << proxy->Log();
  EXPECT_EQ(proxy->CountLines("fault PUT"), 2);
}

TEST_F(S3FaultsTest, GivesUpAfterMaxAttempts) {
  auto proxy = Proxy(R"([{"method":"PUT","path":"faults/always","status":500,"times":-1}])");
  ASSERT_NE(proxy, nullptr);
  S3Config config = quark::testing::S3rver::ConfigFor(proxy->endpoint());
  config.max_attempts = 3;
  S3ObjectStore store(config);
  absl::Status status = store.PutBytes("s3://test/faults/always", "payload");
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(status.message().find("gave up after 3 attempts"), std::string::npos) << status;
  EXPECT_NE(status.message().find("InjectedFault"), std::string::npos) << status;
  EXPECT_EQ(proxy->CountLines("fault PUT"), 3);
}

TEST_F(S3FaultsTest, DoesNotRetryClientErrors) {
  auto proxy = Proxy(R"([{"method":"PUT","path":"faults/forbidden","status":403,"times":-1}])");
  ASSERT_NE(proxy, nullptr);
  S3ObjectStore store(quark::testing::S3rver::ConfigFor(proxy->endpoint()));
  EXPECT_EQ(store.PutBytes("s3://test/faults/forbidden", "x").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(proxy->CountLines("fault PUT"), 1);
}

TEST_F(S3FaultsTest, MultipartPartRetriedAndFailedUploadAborted) {
  auto proxy = Proxy(R"([{"method":"PUT","path":"faults/mp1\\?.*partNumber=2","status":503,"times":1},
                         {"method":"PUT","path":"faults/mp2\\?.*partNumber=2","status":500,"times":-1}])");
  ASSERT_NE(proxy, nullptr);
  S3Config config = quark::testing::S3rver::ConfigFor(proxy->endpoint());
  config.multipart_threshold_bytes = 5 << 20;
  config.part_size_bytes = 5 << 20;
  config.max_attempts = 2;
  S3ObjectStore store(config);
  quark::testing::TempDir dir;
  quark::testing::WriteFile(dir.path() / "big", std::string((10 << 20) + 1, 'q'));
  EXPECT_TRUE(store.PutFile("s3://test/faults/mp1", dir.path() / "big").ok()) << proxy->Log();
  absl::Status failed = store.PutFile("s3://test/faults/mp2", dir.path() / "big");
  EXPECT_EQ(failed.code(), absl::StatusCode::kUnavailable) << failed;
  EXPECT_EQ(store.Head("s3://test/faults/mp2").status().code(), absl::StatusCode::kNotFound);
  EXPECT_GE(proxy->CountLines("forward DELETE"), 1) << "the failed upload was not aborted:\n" << proxy->Log();
}

// The chaos driver's way (tests/chaos/chaos_run.sh): the proxy reads its rules file again whenever it changes;
// "every" spaces the faults out and "delay_ms" forwards late instead of failing.
TEST_F(S3FaultsTest, RulesFromAFileThatChangesWhileTheProxyRuns) {
  quark::testing::TempDir dir;
  const std::filesystem::path rules = dir.path() / "rules.json";
  quark::testing::WriteFile(rules, R"([{"method":"PUT","status":500,"times":-1}])");
  auto proxy = Proxy("@" + rules.string());
  ASSERT_NE(proxy, nullptr);
  S3Config config = quark::testing::S3rver::ConfigFor(proxy->endpoint());
  config.max_attempts = 1;
  S3ObjectStore store(config);
  EXPECT_EQ(store.PutBytes("s3://test/faults/file1", "x").code(), absl::StatusCode::kUnavailable);
  // Replaced, as the driver does it (a new file renamed over the old one).
  quark::testing::WriteFile(dir.path() / "next.json", R"([{"method":"PUT","delay_ms":50,"every":2,"times":-1}])");
  std::filesystem::rename(dir.path() / "next.json", rules);
  for (const char* key : {"file2", "file3", "file4"}) {
    EXPECT_TRUE(store.PutBytes(std::string("s3://test/faults/") + key, "x").ok()) << key << proxy->Log();
  }
  EXPECT_EQ(proxy->CountLines("fault PUT /test/faults/file1 500"), 1) << proxy->Log();
  EXPECT_EQ(proxy->CountLines("fault PUT /test/faults/file2 delay 50"), 1) << proxy->Log();
  EXPECT_EQ(proxy->CountLines("forward PUT /test/faults/file3"), 1) << proxy->Log();
  EXPECT_EQ(proxy->CountLines("fault PUT /test/faults/file4 delay 50"), 1) << proxy->Log();
  std::filesystem::remove(rules);  // no file: no rules
  EXPECT_TRUE(store.PutBytes("s3://test/faults/file5", "x").ok()) << proxy->Log();
}

}  // namespace
}  // namespace quark::storage
