// A thread that swaps a folder for a symlink and back, atomically (renameat2 RENAME_EXCHANGE), as fast as it can:
// the attacker of the storage race tests (a tenant replacing its model or output folder after submit).
#pragma once

#include <fcntl.h>
#include <stdio.h>

#include <atomic>
#include <filesystem>
#include <thread>

namespace quark::testing {

class FolderSwapper {
 public:
  /// Creates `spare` (default `folder`.swap) as a symlink to `target`; Start() then exchanges the two names in a
  /// loop, so `folder` is alternately the real folder and a symlink to `target`. The destructor stops and restores
  /// the folder.
  FolderSwapper(std::filesystem::path folder, const std::filesystem::path& target, std::filesystem::path spare = {})
      : folder_(std::move(folder)), link_(spare.empty() ? std::filesystem::path(folder_.string() + ".swap") : std::move(spare)) {
    std::filesystem::create_directory_symlink(target, link_);
  }
  ~FolderSwapper() { Stop(); }

  void Start() {
    thread_ = std::thread([this] {
      while (!stop_.load()) {
        if (Exchange()) swaps_.fetch_add(1);
        std::this_thread::yield();
      }
    });
  }

  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
    if (swaps_.load() % 2 == 1 && Exchange()) swaps_.fetch_add(1);
  }

  /// Exchanges done so far (each one a change of what `folder` names).
  long swaps() const { return swaps_.load(); }

 private:
  bool Exchange() {
    return renameat2(AT_FDCWD, folder_.c_str(), AT_FDCWD, link_.c_str(), RENAME_EXCHANGE) == 0;
  }

  std::filesystem::path folder_;
  std::filesystem::path link_;
  std::atomic<bool> stop_{false};
  std::atomic<long> swaps_{0};
  std::thread thread_;
};

}  // namespace quark::testing
