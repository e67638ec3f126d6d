// A read-only memory mapping of a whole file (RAII).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace quark::checkpoint {

/// Thread-safe for concurrent reads. Shared through shared_ptr so that tensor views can keep it alive.
class MappedFile {
 public:
  /// Maps `path` read-only (private). Errors: NotFound / PermissionDenied / Internal naming the path and errno.
  static absl::StatusOr<std::shared_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }
  const uint8_t* data() const { return data_; }
  std::string_view bytes() const { return {reinterpret_cast<const char*>(data_), size_}; }

  /// Tells the kernel the range is no longer needed: its pages leave this process's resident set (they
  /// stay in the page cache and fault back in on the next read). Used to keep RSS at one layer while
  /// streaming a model larger than memory. Out-of-range parts are ignored.
  void Release(uint64_t offset, uint64_t length) const;
  /// Hints that the range will be read soon (sequential read-ahead).
  void WillNeed(uint64_t offset, uint64_t length) const;

 private:
  MappedFile(std::string path, const uint8_t* data, uint64_t size) : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace quark::checkpoint
