#include "server/api/uri_policy.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

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

TEST(UriPolicyTest, PathTricksAreRefusedNamingTheField) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.File("root/m"));
  std::filesystem::create_directories(dir.File("outside"));
  UriPolicy policy({dir.File("root")});
  const std::string root = "file://" + dir.File("root");
  for (const std::string& uri : {root + "/%2e%2e/outside", root + "/%2E%2e/x", root + "/a%2fb", root + "/a\\b",
                                 root + "/m\n", std::string("s3://bucket//etc/passwd"), std::string("s3://b/a/../c"),
                                 std::string("s3://b/./c"), std::string("s3://b/a//c"), std::string("s3://b/%2e%2e/c")}) {
    absl::Status status = policy.Check("spec.model_uri", uri, true);
    EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << uri;
    EXPECT_EQ(status.message().rfind("spec.model_uri:", 0), 0u) << status.message();
  }
  EXPECT_TRUE(policy.Check("f", "s3://b/prefix/", true).ok());
  EXPECT_TRUE(policy.Check("f", "s3://b/a%20b", true).ok());  // other escapes are plain characters

  // A hard-linked file (its other name may be outside), in a folder or named itself; a symlink in a folder
  // leading out of the roots.
  { std::ofstream(dir.File("outside/secret")) << "x"; }
  std::filesystem::create_hard_link(dir.File("outside/secret"), dir.File("root/m/weights.safetensors"));
  absl::Status linked = policy.Check("spec.model_uri", root + "/m", true);
  EXPECT_EQ(linked.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(linked.message().find("hard link"), std::string::npos) << linked.message();
  EXPECT_EQ(policy.Check("spec.calibration.uri", root + "/m/weights.safetensors", false).code(),
            absl::StatusCode::kPermissionDenied);
  std::filesystem::remove(dir.File("root/m/weights.safetensors"));
  EXPECT_TRUE(policy.Check("spec.model_uri", root + "/m", true).ok());
  std::filesystem::create_symlink(dir.File("outside/secret"), dir.File("root/m/config.json"));
  absl::Status symlinked = policy.Check("spec.model_uri", root + "/m", true);
  EXPECT_EQ(symlinked.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(symlinked.message().find("symlink"), std::string::npos) << symlinked.message();
}

TEST(UriPolicyTest, ScopesOfATenant) {
  std::vector<std::string> prefixes = {"file:///srv/a", "s3://bucket/a/", "s3://exact/p"};
  EXPECT_TRUE(UriPolicy::CheckScope("f", "file:///srv/a/m", prefixes, "x").ok());
  EXPECT_TRUE(UriPolicy::CheckScope("f", "s3://bucket/a/m", prefixes, "x").ok());
  EXPECT_TRUE(UriPolicy::CheckScope("f", "s3://exact/p/m", prefixes, "x").ok());
  EXPECT_TRUE(UriPolicy::CheckScope("f", "", prefixes, "x").ok());
  for (const std::string& uri : {"file:///srv/ab", "file:///srv/a/../b", "s3://bucket/ab", "s3://exact/pq",
                                 "s3://other/a/m"}) {
    absl::Status status = UriPolicy::CheckScope("spec.output_uri", uri, prefixes, "tenant a's output_prefixes");
    EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << uri;
    EXPECT_NE(status.message().find("spec.output_uri: "), std::string::npos);
  }
}

}  // namespace
}  // namespace quark::server
