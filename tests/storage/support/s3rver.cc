#include "tests/storage/support/s3rver.h"

#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace quark::testing {
namespace fs = std::filesystem;

absl::StatusOr<std::unique_ptr<S3rver>> S3rver::Start(const std::string& bucket,
                                                      const std::map<std::string, std::string>& extra_keys) {
  fs::path modules = NodeModulesDir();
  if (modules.empty() || !fs::exists(modules / "s3rver/bin/s3rver.js")) {
    return absl::FailedPreconditionError("s3rver is not installed: run scripts/install-test-peers.sh");
  }
  auto server = std::unique_ptr<S3rver>(new S3rver());
  fs::create_directories(server->dir_.path() / "data");
  // s3rver 3.7 mints ListObjectsV2 continuation tokens with DES-CBC, which Node 17+ (OpenSSL 3) only has in the
  // legacy provider: without it every listing past 1,000 keys answers 500 (s3rver's bug, not the client's; real S3
  // and MinIO tokens are opaque strings). The flag loads that provider for s3rver's process only.
  // Through the launcher: read-after-write consistent PUTs, and the extra access keys (s3rver_launcher.js).
  fs::path launcher = fs::path(EnvOr("QUARK_SOURCE_DIR", QUARK_TEST_SOURCE_DIR)) / "tests/storage/support/s3rver_launcher.js";
  nlohmann::json keys = nlohmann::json::object();
  for (const auto& [id, secret] : extra_keys) keys[id] = secret;
  std::vector<std::string> argv = {"node", "--openssl-legacy-provider", launcher.string(), modules.string(), keys.dump()};
  for (const std::string& arg : {std::string("-d"), (server->dir_.path() / "data").string(), std::string("-a"),
                                 std::string("127.0.0.1"), std::string("-p"), std::string("0"), std::string("-s"),
                                 std::string("--configure-bucket"), bucket}) {
    argv.push_back(arg);
  }
  absl::StatusOr<std::unique_ptr<Subprocess>> process = Subprocess::Start(argv, {}, server->dir_.path() / "s3rver.log");
  if (!process.ok()) return process.status();
  server->process_ = std::move(*process);
  absl::StatusOr<std::string> port =
      server->process_->WaitForLine(std::regex("listening on 127\\.0\\.0\\.1:(\\d+)"), std::chrono::seconds(30));
  if (!port.ok()) return port.status();
  server->endpoint_ = absl::StrCat("http://127.0.0.1:", *port);
  return server;
}

storage::S3Config S3rver::ConfigFor(const std::string& endpoint) {
  storage::S3Config config;
  config.endpoint = endpoint;
  config.region = "us-east-1";
  config.credentials = {"S3RVER", "S3RVER", ""};
  config.initial_backoff = std::chrono::milliseconds(1);
  config.max_backoff = std::chrono::milliseconds(20);
  return config;
}

std::vector<std::string> S3rver::Env() const {
  return {absl::StrCat("AWS_ENDPOINT_URL=", endpoint_), "AWS_ACCESS_KEY_ID=S3RVER", "AWS_SECRET_ACCESS_KEY=S3RVER",
          "AWS_REGION=us-east-1"};
}

absl::StatusOr<std::unique_ptr<FaultProxy>> FaultProxy::Start(const std::string& target_endpoint,
                                                              const std::string& rules_json) {
  fs::path script = fs::path(EnvOr("QUARK_SOURCE_DIR", QUARK_TEST_SOURCE_DIR)) / "tests/storage/support/fault_proxy.js";
  auto proxy = std::unique_ptr<FaultProxy>(new FaultProxy());
  absl::StatusOr<std::unique_ptr<Subprocess>> process = Subprocess::Start(
      {"node", script.string(), target_endpoint, rules_json}, {}, proxy->dir_.path() / "proxy.log");
  if (!process.ok()) return process.status();
  proxy->process_ = std::move(*process);
  absl::StatusOr<std::string> port =
      proxy->process_->WaitForLine(std::regex("fault-proxy listening on (\\d+)"), std::chrono::seconds(30));
  if (!port.ok()) return port.status();
  proxy->endpoint_ = absl::StrCat("http://127.0.0.1:", *port);
  return proxy;
}

int FaultProxy::CountLines(const std::string& prefix) const {
  std::istringstream lines(process_->Log());
  std::string line;
  int count = 0;
  while (std::getline(lines, line)) count += absl::StartsWith(line, prefix) ? 1 : 0;
  return count;
}

}  // namespace quark::testing
