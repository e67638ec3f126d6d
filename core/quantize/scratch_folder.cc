#include "core/quantize/scratch_folder.h"

#include <cstdlib>
#include <filesystem>

#include "core/base/strings.h"

namespace quark::quantize {

namespace fs = std::filesystem;

absl::StatusOr<std::unique_ptr<ScratchFolder>> ScratchFolder::Create(const std::string& parent,
                                                                      const std::string& prefix) {
  std::error_code ec;
  const fs::path base = parent.empty() ? fs::temp_directory_path(ec) : fs::path(parent);
  if (ec) return absl::InternalError(StrCat("temporary directory: ", ec.message()));
  std::string pattern = (base / (prefix + "-XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    return absl::InternalError(StrCat(pattern, ": cannot create a scratch folder"));
  }
  return std::unique_ptr<ScratchFolder>(new ScratchFolder(pattern));
}

ScratchFolder::~ScratchFolder() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

}  // namespace quark::quantize
