// Test helper: a real s3rver (npm) on 127.0.0.1 with a fresh data folder and one bucket, and an optional fault
// proxy in front of it (tests/storage/support/fault_proxy.js) that answers chosen requests with errors or resets.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "tests/storage/support/subprocess.h"
#include "worker/storage/s3_config.h"

namespace quark::testing {

class S3rver {
 public:
  /// Starts s3rver with bucket `bucket`; FAILED_PRECONDITION when node or the npm peers are missing.
  /// `extra_keys` (access key id -> secret) are accepted besides S3RVER/S3RVER; any other key id is refused with 403
  /// InvalidAccessKeyId. s3rver runs through tests/storage/support/s3rver_launcher.js, which also makes its PUTs
  /// read-after-write consistent, as S3's are.
  static absl::StatusOr<std::unique_ptr<S3rver>> Start(const std::string& bucket = "test",
                                                       const std::map<std::string, std::string>& extra_keys = {});

  /// "http://127.0.0.1:PORT".
  const std::string& endpoint() const { return endpoint_; }
  /// An S3Config for this server (s3rver's fixed keys S3RVER/S3RVER), with millisecond backoffs for tests.
  storage::S3Config Config() const { return ConfigFor(endpoint_); }
  static storage::S3Config ConfigFor(const std::string& endpoint);
  /// The environment a child process needs to reach this server (AWS_ENDPOINT_URL, keys, region).
  std::vector<std::string> Env() const;

 private:
  TempDir dir_;
  std::unique_ptr<Subprocess> process_;
  std::string endpoint_;
};

/// A fault-injecting HTTP proxy. `rules_json` is a JSON array of
///   {"method": "PUT", "path": "<regex on the path+query>", "status": 503 | "reset": true | "hang": true,
///    "times": N (-1 = always)}
/// applied in order to each request; unmatched requests are forwarded. Every fault is logged as a line
/// "fault METHOD PATH STATUS|reset", every forward as "forward METHOD PATH", a request left unanswered ("hang")
/// as "hang METHOD PATH".
class FaultProxy {
 public:
  static absl::StatusOr<std::unique_ptr<FaultProxy>> Start(const std::string& target_endpoint,
                                                           const std::string& rules_json);
  const std::string& endpoint() const { return endpoint_; }
  /// Lines of the proxy's log that start with `prefix`.
  int CountLines(const std::string& prefix) const;
  std::string Log() const { return process_->Log(); }

 private:
  TempDir dir_;
  std::unique_ptr<Subprocess> process_;
  std::string endpoint_;
};

}  // namespace quark::testing
