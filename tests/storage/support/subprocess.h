// Test helper: a child process whose stdout and stderr go to a log file, stopped (SIGTERM, then SIGKILL) and
// reaped when the object dies.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace quark::testing {

class Subprocess {
 public:
  /// Starts argv[0] (looked up in PATH) with `env` added to this process's environment; output goes to `log`.
  static absl::StatusOr<std::unique_ptr<Subprocess>> Start(const std::vector<std::string>& argv,
                                                           const std::vector<std::string>& env,
                                                           const std::filesystem::path& log);
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  /// Waits until a line of the log matches `pattern` and returns its first capture group (or the whole line).
  /// DEADLINE_EXCEEDED with the log's tail after `timeout`; UNAVAILABLE if the child exited first.
  absl::StatusOr<std::string> WaitForLine(const std::regex& pattern, std::chrono::milliseconds timeout);

  /// Sends `signal` and waits for the exit; returns the exit code (128 + signal when killed).
  int Stop(int signal);
  /// Waits for the child to exit on its own; DEADLINE_EXCEEDED after `timeout`.
  absl::StatusOr<int> Wait(std::chrono::milliseconds timeout);

  std::string Log() const;
  pid_t pid() const { return pid_; }

 private:
  Subprocess(pid_t pid, std::filesystem::path log) : pid_(pid), log_(std::move(log)) {}
  bool Reap(int options, int* code);

  pid_t pid_;
  std::filesystem::path log_;
  bool exited_ = false;
  int exit_code_ = 0;
};

/// A fresh folder under the test's temp dir, removed with the object.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// The value of an environment variable that ctest sets (QUARK_SOURCE_DIR, ...), or `fallback`.
std::string EnvOr(const char* name, const std::string& fallback);

/// tests/peers/node_modules of the source tree, or "" when the npm peers are not installed.
std::filesystem::path NodeModulesDir();

/// Writes `bytes` to `path`, creating parent folders.
void WriteFile(const std::filesystem::path& path, const std::string& bytes);

/// Reads a whole file ("" when missing).
std::string ReadFile(const std::filesystem::path& path);

}  // namespace quark::testing
