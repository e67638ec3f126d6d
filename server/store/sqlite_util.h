// RAII wrappers over the SQLite C API: a connection and its prepared statements, errors as absl::Status.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace quark::server {

struct SqliteCloser {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
struct SqliteFinalizer {
  void operator()(sqlite3_stmt* stmt) const { sqlite3_finalize(stmt); }
};
using SqliteDb = std::unique_ptr<sqlite3, SqliteCloser>;

/// A prepared statement. Bind parameters are 1-based, as in SQLite. Not thread-safe: the owning store
/// serialises access to its connection.
class Statement {
 public:
  Statement() = default;
  Statement(sqlite3* db, std::unique_ptr<sqlite3_stmt, SqliteFinalizer> stmt) : db_(db), stmt_(std::move(stmt)) {}

  Statement& Bind(int index, int64_t value);
  Statement& Bind(int index, std::string_view text);
  Statement& BindBlob(int index, const std::string& bytes);
  Statement& BindNull(int index);

  /// Steps once: true when a row is available, false when done; errors name the SQL.
  absl::StatusOr<bool> Step();
  /// Steps to completion (statements without rows).
  absl::Status Run();
  /// Clears bindings and rewinds, so the statement can be reused.
  void Reset();

  int64_t ColumnInt(int column) const;
  std::string ColumnText(int column) const;
  std::string ColumnBlob(int column) const;
  bool ColumnIsNull(int column) const;

 private:
  sqlite3* db_ = nullptr;
  std::unique_ptr<sqlite3_stmt, SqliteFinalizer> stmt_;
};

/// Opens (creating when missing) a database file in WAL mode with a busy timeout.
absl::StatusOr<SqliteDb> OpenSqlite(const std::string& path);

/// Prepares one statement; INTERNAL naming the SQL and SQLite's message on failure.
absl::StatusOr<Statement> Prepare(sqlite3* db, std::string_view sql);

/// Runs SQL without results (may hold several statements).
absl::Status Exec(sqlite3* db, const std::string& sql);

/// A transaction that rolls back unless Commit() succeeded.
class Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db) {}
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  absl::Status Begin();
  absl::Status Commit();

 private:
  sqlite3* db_;
  bool open_ = false;
};

}  // namespace quark::server
