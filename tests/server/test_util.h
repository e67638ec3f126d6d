// Helpers shared by the server tests: temporary folders and bounded waits.
#pragma once

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace quark::server::testing {

/// A fresh folder under the system temp dir, removed with its contents on destruction.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "quarkd-test-XXXXXX").string();
    path_ = mkdtemp(pattern.data()) != nullptr ? pattern : "";
  }
  ~TempDir() {
    std::error_code error;
    std::filesystem::remove_all(path_, error);
  }
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

/// Polls `done` every 10 ms for at most `limit`; true once it holds. For waits on other processes, where no
/// clock can be injected (no test asserts how long anything took).
inline bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  auto give_up = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < give_up) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

/// A path in the build tree (QUARK_BINARY_DIR, set by ctest).
inline std::string BuildPath(const std::string& relative) {
  const char* dir = std::getenv("QUARK_BINARY_DIR");
  return std::string(dir != nullptr ? dir : ".") + "/" + relative;
}

}  // namespace quark::server::testing
