// Versioned schema migrations of the SQLite job store.
#pragma once

#include <sqlite3.h>

#include "absl/status/status.h"

namespace quark::server {

/// The schema version this build writes.
inline constexpr int kJobStoreSchemaVersion = 6;

/// Applies every migration above the file's recorded version, each in its own transaction.
/// FAILED_PRECONDITION when the file was written by a newer quarkd (its version is above ours).
absl::Status MigrateJobStore(sqlite3* db);

}  // namespace quark::server
