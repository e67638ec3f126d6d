// Versioned schema migrations of the PostgreSQL job store (postgres_job_store.h).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "server/store/pg_util.h"

namespace quark::server {

/// SQL for an attempt row's bytes as the storage quota counts them (AttemptRowBytes in job_store.h); `row` is the
/// table alias or NEW/OLD in a trigger.
std::string PgAttemptBytes(const std::string& row);

/// Applies every migration above the database's recorded version in one transaction, under an advisory lock so
/// that replicas starting together migrate one at a time. FAILED_PRECONDITION when the database was written by a
/// newer quarkd.
absl::Status MigratePostgres(PGconn* conn);

}  // namespace quark::server
