// The status of a failed write, flush, close or copy of an output file (#33 item 4): RESOURCE_EXHAUSTED when the
// disk or the quota is full, so a job runner can tell a full disk (another attempt elsewhere may succeed, the job is
// handed back) from a broken writer; INTERNAL otherwise. Header-only: its users already link abseil's status.
#pragma once

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

#include "absl/status/status.h"
#include "core/base/strings.h"

namespace quark {

/// True for the errno values of a full disk or quota (ENOSPC, EDQUOT).
inline bool IsDiskFull(int err) { return err == ENOSPC || err == EDQUOT; }

/// "<what>: <strerror(err)>" as RESOURCE_EXHAUSTED for a full disk or quota, INTERNAL otherwise. `what` should name
/// the file, e.g. WriteError(StrCat("writing ", path), errno).
inline absl::Status WriteError(const std::string& what, int err) {
  std::string text = StrCat(what, ": ", std::strerror(err));
  return IsDiskFull(err) ? absl::ResourceExhaustedError(text) : absl::InternalError(text);
}

/// The same for std::filesystem's error codes (copy_file, rename, create_directories).
inline absl::Status WriteError(const std::string& what, const std::error_code& ec) {
  std::string text = StrCat(what, ": ", ec.message());
  const bool full = ec == std::errc::no_space_on_device || (ec.category() == std::system_category() && IsDiskFull(ec.value()));
  return full ? absl::ResourceExhaustedError(text) : absl::InternalError(text);
}

}  // namespace quark
