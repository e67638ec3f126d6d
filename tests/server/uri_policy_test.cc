#include "server/api/uri_policy.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "tests/server/test_util.h"

namespace quark::server {
namespace {

TEST(UriPolicyTest, ConfinesFilePathsToTheRoots) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.File("models/llama"));
  UriPolicy policy({dir.File("models")});
  EXPECT_TRUE(policy.Check("spec.model_uri", "file://" + dir.File("models/llama"), true).ok());
  EXPECT_TRUE(policy.Check("spec.model_uri", "file://" + dir.File("models/not-yet-there/x"), true).ok());
  absl::Status escape = policy.Check("spec.model_uri", "file://" + dir.File("models/../secrets"), true);
  EXPECT_EQ(escape.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(escape.message().find("spec.model_uri"), std::string::npos);
  EXPECT_NE(escape.message().find("secrets"), std::string::npos);
  // A sibling whose name starts like the root is not inside it.
  EXPECT_EQ(policy.Check("f", "file://" + dir.File("models2/x"), true).code(), absl::StatusCode::kPermissionDenied);
}

TEST(UriPolicyTest, SymlinksOutOfARootAreRefused) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.File("root"));
  std::filesystem::create_directories(dir.File("outside"));
  std::filesystem::create_directory_symlink(dir.File("outside"), dir.File("root/link"));
  UriPolicy policy({dir.File("root")});
  EXPECT_EQ(policy.Check("f", "file://" + dir.File("root/link/m"), true).code(), absl::StatusCode::kPermissionDenied);
}

TEST(UriPolicyTest, SchemesAndRequiredFields) {
  UriPolicy policy({"/data"});
  EXPECT_TRUE(policy.Check("spec.output_uri", "s3://bucket/prefix", true).ok());
  EXPECT_TRUE(policy.Check("spec.calibration.uri", "", false).ok());
  absl::Status missing = policy.Check("spec.model_uri", "", true);
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(missing.message().find("spec.model_uri: required"), std::string::npos);
  EXPECT_EQ(policy.Check("f", "http://x/y", true).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(policy.Check("f", "s3:///key", true).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(policy.Check("f", "file://relative/path", true).code(), absl::StatusCode::kInvalidArgument);
  UriPolicy none({});
  EXPECT_EQ(none.Check("f", "file:///data/x", true).code(), absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace quark::server
