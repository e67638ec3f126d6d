#include "server/security/security_config.h"

#include <gtest/gtest.h>

#include <string>

namespace quark::server {
namespace {

std::string Hash(const std::string& token) { return Sha256Hex(token); }

TEST(SecurityConfigTest, ParsesTokensIdentitiesAndTenants) {
  std::string json = R"({"tokens": [
      {"name": "ci", "sha256": ")" + Hash("t1") + R"(", "tenant": "acme", "role": "submitter"},
      {"sha256": ")" + Hash("t2") + R"(", "role": "admin"},
      {"name": "gpu", "mtls_identity": "worker-1.example", "role": "worker"}],
    "tenants": {"acme": {"model_roots": ["file:///srv/m", "s3://b/m/"], "output_prefixes": ["s3://b/out/"],
                         "max_queued_jobs": 3, "max_running_jobs": 1,
                         "storage": {"access_key_id": "AK", "secret_access_key": "SK"}}}})";
  absl::StatusOr<SecurityConfig> config = ParseSecurityConfig(json);
  ASSERT_TRUE(config.ok()) << config.status();
  const Principal& ci = config->by_token_sha256.at(Hash("t1"));
  EXPECT_EQ(ci.name, "ci");
  EXPECT_EQ(ci.tenant, "acme");
  EXPECT_TRUE(ci.Has(Role::kViewer));
  EXPECT_TRUE(ci.Has(Role::kSubmitter));
  EXPECT_FALSE(ci.Has(Role::kAdmin));
  EXPECT_FALSE(ci.Has(Role::kWorker));
  const Principal& admin = config->by_token_sha256.at(Hash("t2"));
  EXPECT_EQ(admin.name, "token-" + Hash("t2").substr(0, 8));
  EXPECT_TRUE(admin.SeesAllTenants());
  EXPECT_FALSE(admin.Has(Role::kWorker));
  EXPECT_TRUE(config->by_identity.at("worker-1.example").Has(Role::kWorker));
  const TenantPolicy& acme = config->tenants.at("acme");
  EXPECT_EQ(acme.model_roots.size(), 2u);
  EXPECT_EQ(acme.max_queued_jobs, 3);
  EXPECT_EQ(acme.max_running_jobs, 1);
  EXPECT_EQ(acme.storage.secret_access_key(), "SK");
  Principal anonymous{"anonymous", "", Role::kAdmin, true};
  EXPECT_TRUE(anonymous.Has(Role::kWorker));
}

TEST(SecurityConfigTest, EveryBadEntryIsNamed) {
  const std::string h = Hash("t");
  const std::pair<std::string, std::string> cases[] = {
      {"not json", "not valid JSON"},
      {R"({"tokenz": []})", "tokens file.tokenz: unknown key"},
      {R"({"tokens": [{"sha256": "abc", "tenant": "a", "role": "viewer"}]})", "tokens[0].sha256: expected 64"},
      {R"({"tokens": [{"sha256": ")" + h + R"(", "tenant": "a", "role": "root"}]})", "tokens[0].role: \"root\""},
      {R"({"tokens": [{"sha256": ")" + h + R"(", "role": "viewer"}]})", "tokens[0].tenant: required for role viewer"},
      {R"({"tokens": [{"sha256": ")" + h + R"(", "tenant": "a b", "role": "viewer"}]})", "tokens[0].tenant: \"a b\""},
      {R"({"tokens": [{"sha256": ")" + h + R"(", "tenant": "a", "role": "worker"}]})", "tokens[0].tenant: workers"},
      {R"({"tokens": [{"tenant": "a", "role": "viewer"}]})", "tokens[0]: needs exactly one"},
      {R"({"tokens": [{"sha256": ")" + h + R"(", "role": "admin"}, {"sha256": ")" + h + R"(", "role": "admin"}]})",
       "tokens[1].sha256: listed twice"},
      // The local workers' principal: a token of that name could act as every local worker id.
      {R"({"tokens": [{"name": "local-worker", "sha256": ")" + h + R"(", "role": "worker"}]})",
       "tokens[0].name: \"local-worker\" is the name of quarkd's own local workers"},
      {R"({"tokens": [{"mtls_identity": "local-worker", "role": "worker"}]})", "tokens[0].name: \"local-worker\""},
      {R"({"tokens": [{"name": "quarkd-retention", "sha256": ")" + h + R"(", "role": "admin"}]})",
       "tokens[0].name: \"quarkd-retention\" is the name of quarkd's retention sweeps"},
      {R"({"tenants": {"a": {"model_roots": ["/srv"]}}})", "tenants.a.model_roots[0]: \"/srv\" is not"},
      {R"({"tenants": {"a": {"output_prefixes": ["s3://b/../c"]}}})", "tenants.a.output_prefixes[0]"},
      {R"({"tenants": {"a": {"max_queued_jobs": -1}}})", "tenants.a.max_queued_jobs: expected a non-negative"},
      {R"({"tenants": {"a": {"storage": {"access_key_id": "AK"}}}})", "tenants.a.storage: access_key_id and"},
  };
  for (const auto& [json, expected] : cases) {
    absl::StatusOr<SecurityConfig> config = ParseSecurityConfig(json);
    ASSERT_FALSE(config.ok()) << json;
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(config.status().message().find(expected), std::string::npos) << config.status() << " vs " << expected;
  }
}

TEST(SecurityConfigTest, HashesAndTokens) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  std::string a = NewRandomToken();
  std::string b = NewRandomToken();
  EXPECT_EQ(a.size(), 3u + 43u);
  EXPECT_NE(a, b);
  EXPECT_TRUE(ConstantTimeEquals(a, a));
  EXPECT_FALSE(ConstantTimeEquals(a, b));
  EXPECT_FALSE(ConstantTimeEquals("ab", "abc"));
}

}  // namespace
}  // namespace quark::server
