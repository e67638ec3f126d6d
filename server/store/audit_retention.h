// The audit log's retention rule (#29), shared by the SQLite and PostgreSQL stores: the log is bounded in records,
// oldest first, and what it keeps stays append-only.
#pragma once

#include <cstdint>

namespace quark::server {

/// Every AppendAudit deletes the records whose sequence is this far or more below the new record's, so the log
/// holds at most this many records (~300 bytes each: a few hundred MB at most) however many calls are refused.
/// The stores' triggers still refuse every UPDATE, every TRUNCATE and any DELETE of the newest this-many records,
/// so nothing recent can be altered or erased through SQL. Read the log (ListAuditRecords) or ship quarkd's log
/// lines elsewhere to keep more. The triggers hold this number (migration 5 of each store): changing it needs a
/// new migration in both.
inline constexpr int64_t kAuditLogMaxRecords = 1000000;

}  // namespace quark::server
