// Versioned schema migrations of the SQLite job store.
#pragma once

#include <string>

#include <sqlite3.h>

#include "absl/status/status.h"

namespace quark::server {

/// SQL for an attempt row's bytes as the storage quota counts them (AttemptRowBytes in job_store.h); `row` is the
/// table alias or NEW/OLD in a trigger.
std::string SqliteAttemptBytes(const std::string& row);

/// The schema version this build writes.
inline constexpr int kJobStoreSchemaVersion = 7;

/// Applies every migration above the file's recorded version, each in its own transaction.
/// FAILED_PRECONDITION when the file was written by a newer quarkd (its version is above ours).
absl::Status MigrateJobStore(sqlite3* db);

}  // namespace quark::server
