// A run's folder of temporary files (the algorithms' weight spills): made unique under a parent folder and removed,
// with everything in it, when the object goes.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace quark::quantize {

class ScratchFolder {
 public:
  /// "<parent>/<prefix>-XXXXXX" (empty parent = the system's temporary directory). INTERNAL naming the path on failure.
  static absl::StatusOr<std::unique_ptr<ScratchFolder>> Create(const std::string& parent, const std::string& prefix);
  ~ScratchFolder();
  ScratchFolder(const ScratchFolder&) = delete;
  ScratchFolder& operator=(const ScratchFolder&) = delete;

  const std::string& path() const { return path_; }

 private:
  explicit ScratchFolder(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

}  // namespace quark::quantize
