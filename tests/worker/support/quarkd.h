// Test helper: a real quarkd on 127.0.0.1 (port 0) with a fresh data folder, optionally supervising local
// quark-test-worker processes in a test mode; plus the paths of the built binaries.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/storage/support/subprocess.h"

namespace quark::testing {

/// $QUARK_BINARY_DIR/<relative> (ctest sets it), else the build tree this test was compiled in.
std::string BuiltBinary(const std::string& relative);

struct QuarkdOptions {
  /// Local workers quarkd spawns (quark-test-worker); 0 = none (the test runs its own).
  int workers = 0;
  /// --test-mode of the spawned workers: "noop" or "sleep:SECONDS"; empty = real jobs (needs the engine build).
  std::string test_mode = "noop";
  /// The worker executable, relative to the build folder.
  std::string worker_binary = "tests/worker/quark-test-worker";
  /// Folders file:// URIs may name besides the test's own folder (e.g. the shared fixtures).
  std::vector<std::string> extra_roots;
  /// Extra environment for quarkd and, through it, its workers (AWS_* for s3rver).
  std::vector<std::string> env;
  std::vector<std::string> extra_args;
};

class Quarkd {
 public:
  static absl::StatusOr<std::unique_ptr<Quarkd>> Start(const QuarkdOptions& options);

  /// "127.0.0.1:PORT".
  const std::string& address() const { return address_; }
  /// The data folder, also quarkd's (and its workers') allowed file root.
  const std::filesystem::path& root() const { return dir_.path(); }
  std::string Log() const { return process_->Log(); }
  Subprocess& process() { return *process_; }

 private:
  TempDir dir_;
  std::unique_ptr<Subprocess> process_;
  std::string address_;
};

}  // namespace quark::testing
