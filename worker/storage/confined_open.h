// Opening paths a caller named without following a symlink swapped in after a check (TOCTOU): one component at a
// time, each relative to the folder opened before it, with O_NOFOLLOW.
#pragma once

#include <filesystem>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace quark::storage {

/// An owned file descriptor, closed on destruction; movable.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd();
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

/// What the last component must be.
enum class OpenAs {
  kFile,       // a regular file, opened O_RDONLY
  kDirectory,  // a folder, opened O_RDONLY | O_DIRECTORY (usable with openat, fdopendir)
  kAny,        // either, opened O_RDONLY
};

struct ConfinedOpenOptions {
  OpenAs as = OpenAs::kFile;
  /// kDirectory only: missing folders inside the roots are created (mode 0777 & ~umask) on the way.
  bool create_dirs = false;
};

/// A descriptor and the path it was reached by (absolute, no symlink, "." or ".." in it).
struct ConfinedHandle {
  UniqueFd fd;
  std::filesystem::path path;
};

/// Opens the absolute `path` one component at a time: each component with openat(previous folder, name,
/// O_NOFOLLOW); a symlink met on the way is read (readlinkat on the link itself) and its target walked the same
/// way (at most 40 links); ".." drops the last component reached, as the kernel would after expanding links. So
/// the descriptor returned is what a walk of the names present at that moment reached, and the path it returns is
/// where that was. The path must lie inside one of `roots` (canonical folders), else PERMISSION_DENIED naming
/// `uri` and the roots; a component that changes between the walk's two opens of the last one is PERMISSION_DENIED
/// too. NOT_FOUND "<uri>: no such file" (or "no such directory") when a component is missing or of the wrong
/// kind; `create_dirs` creates missing folders, only inside the roots.
absl::StatusOr<ConfinedHandle> OpenConfined(const std::vector<std::filesystem::path>& roots, std::string_view uri,
                                            const std::filesystem::path& path, ConfinedOpenOptions options = {});

/// Whether the canonical `path` is `root` or lies below it (component-wise, no string prefix tricks).
bool IsInsideRoot(const std::filesystem::path& path, const std::filesystem::path& root);

}  // namespace quark::storage
