#include "worker/storage/s3_config.h"

#include <gtest/gtest.h>

#include <map>

#include "tests/storage/support/subprocess.h"

namespace quark::storage {
namespace {

EnvLookup MapEnv(std::map<std::string, std::string> values) {
  return [values](const char* name) -> std::optional<std::string> {
    auto it = values.find(name);
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}

TEST(S3ConfigTest, ReadsEnvironment) {
  absl::StatusOr<S3Config> config = LoadS3Config(MapEnv({{"AWS_ACCESS_KEY_ID", "AK"},
                                                         {"AWS_SECRET_ACCESS_KEY", "SK"},
                                                         {"AWS_SESSION_TOKEN", "TOK"},
                                                         {"AWS_REGION", "eu-west-1"},
                                                         {"AWS_ENDPOINT_URL", "http://127.0.0.1:9000/"}}));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->credentials.access_key_id, "AK");
  EXPECT_EQ(config->credentials.secret_access_key, "SK");
  EXPECT_EQ(config->credentials.session_token, "TOK");
  EXPECT_EQ(config->region, "eu-west-1");
  EXPECT_EQ(config->EffectiveEndpoint(), "http://127.0.0.1:9000");
}

TEST(S3ConfigTest, DefaultsToAwsEndpoint) {
  absl::StatusOr<S3Config> config = LoadS3Config(MapEnv({{"AWS_DEFAULT_REGION", "us-west-2"}}));
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->EffectiveEndpoint(), "https://s3.us-west-2.amazonaws.com");
  EXPECT_TRUE(config->credentials.access_key_id.empty());
}

TEST(S3ConfigTest, ReadsCredentialsAndConfigFiles) {
  testing::TempDir dir;
  testing::WriteFile(dir.path() / "credentials",
                     "[default]\naws_access_key_id = D\naws_secret_access_key = DS\n"
                     "[ci]\n# comment\nAWS_ACCESS_KEY_ID=CI\naws_secret_access_key=CIS\n");
  testing::WriteFile(dir.path() / "config", "[profile ci]\nregion = ap-south-1\nendpoint_url = https://minio:9000\n");
  absl::StatusOr<S3Config> config =
      LoadS3Config(MapEnv({{"AWS_SHARED_CREDENTIALS_FILE", (dir.path() / "credentials").string()},
                           {"AWS_CONFIG_FILE", (dir.path() / "config").string()},
                           {"AWS_PROFILE", "ci"}}));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->credentials.access_key_id, "CI");
  EXPECT_EQ(config->credentials.secret_access_key, "CIS");
  EXPECT_EQ(config->region, "ap-south-1");
  EXPECT_EQ(config->endpoint, "https://minio:9000");
}

TEST(S3ConfigTest, RejectsHalfKeysAndBadEndpoints) {
  absl::StatusOr<S3Config> half = LoadS3Config(MapEnv({{"AWS_ACCESS_KEY_ID", "AK"}}));
  EXPECT_EQ(half.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(half.status().message().find("AWS_SECRET_ACCESS_KEY"), std::string::npos);
  absl::StatusOr<S3Config> bad = LoadS3Config(MapEnv({{"AWS_ENDPOINT_URL", "minio:9000"}}));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("minio:9000"), std::string::npos);
}

}  // namespace
}  // namespace quark::storage
