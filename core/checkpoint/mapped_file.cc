#include "core/checkpoint/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "core/base/strings.h"

namespace quark::checkpoint {
namespace {

absl::Status ErrnoStatus(const std::string& what, const std::string& path, int err) {
  const std::string message = quark::StrCat(what, " ", path, ": ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(message);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(message);
  return absl::InternalError(message);
}

// Page-aligned inner part of [offset, offset + length) clipped to the file, so that advice never
// reaches a neighbour's bytes on a shared page boundary... except for whole pages inside the range.
bool InnerPages(uint64_t size, uint64_t offset, uint64_t length, uint64_t* begin, uint64_t* end) {
  static const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  if (offset >= size) return false;
  uint64_t last = length > size - offset ? size : offset + length;
  *begin = (offset + page - 1) / page * page;
  *end = last == size ? (size + page - 1) / page * page : last / page * page;
  return *end > *begin;
}

}  // namespace

absl::StatusOr<std::shared_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("cannot open", path, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoStatus("cannot stat", path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(quark::StrCat(path, " is not a regular file"));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  const uint8_t* data = nullptr;
  if (size > 0) {
    void* mapped = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapped == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return ErrnoStatus("cannot mmap", path, err);
    }
    data = static_cast<const uint8_t*>(mapped);
  }
  ::close(fd);  // the mapping keeps the file open
  return std::shared_ptr<MappedFile>(new MappedFile(path, data, size));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

void MappedFile::Release(uint64_t offset, uint64_t length) const {
  uint64_t begin = 0, end = 0;
  if (data_ == nullptr || !InnerPages(size_, offset, length, &begin, &end)) return;
  // A private read-only mapping that was never written: dropped pages re-read from the file on next access.
  ::madvise(const_cast<uint8_t*>(data_) + begin, end - begin, MADV_DONTNEED);
}

void MappedFile::WillNeed(uint64_t offset, uint64_t length) const {
  uint64_t begin = 0, end = 0;
  if (data_ == nullptr || !InnerPages(size_, offset, length, &begin, &end)) return;
  ::madvise(const_cast<uint8_t*>(data_) + begin, end - begin, MADV_WILLNEED);
}

}  // namespace quark::checkpoint
