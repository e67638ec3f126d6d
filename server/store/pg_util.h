// RAII wrappers over libpq: a connection, a result, text parameters (bytea sent binary), errors as absl::Status.
#pragma once

#include <libpq-fe.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace quark::server {

struct PgConnCloser {
  void operator()(PGconn* conn) const { PQfinish(conn); }
};
struct PgResultCloser {
  void operator()(PGresult* result) const { PQclear(result); }
};
using PgConn = std::unique_ptr<PGconn, PgConnCloser>;

/// A query's parameters, $1.. in order: text for numbers and strings, binary for bytea, or NULL.
class PgParams {
 public:
  PgParams& Add(int64_t value);
  PgParams& Add(const std::string& text);
  PgParams& AddBytes(const std::string& bytes);
  PgParams& AddNull();

  int size() const { return static_cast<int>(values_.size()); }
  const char* const* values() const { return pointers_.data(); }
  const int* lengths() const { return lengths_.data(); }
  const int* formats() const { return formats_.data(); }

 private:
  void Push(std::optional<std::string> value, int format);
  void Rebuild();
  std::vector<std::optional<std::string>> values_;
  std::vector<const char*> pointers_;
  std::vector<int> lengths_;
  std::vector<int> formats_;
};

/// A result in text format. Rows and columns are 0-based.
class PgResult {
 public:
  explicit PgResult(PGresult* result) : result_(result) {}
  int rows() const { return PQntuples(result_.get()); }
  bool IsNull(int row, int column) const { return PQgetisnull(result_.get(), row, column) != 0; }
  std::string Text(int row, int column) const;
  int64_t Int(int row, int column) const;
  bool Bool(int row, int column) const;
  /// A bytea column (hex text format) decoded.
  std::string Bytes(int row, int column) const;
  /// Rows changed by an INSERT/UPDATE/DELETE.
  int64_t Affected() const;

 private:
  std::unique_ptr<PGresult, PgResultCloser> result_;
};

/// Connects to a libpq DSN (postgres://... or key=value); UNAVAILABLE with libpq's message (password removed).
absl::StatusOr<PgConn> ConnectPg(const std::string& dsn);

/// Runs one statement with parameters. Errors: ABORTED for serialization failures and deadlocks (retryable),
/// ALREADY_EXISTS for unique violations, UNAVAILABLE for a lost connection, INTERNAL otherwise; each names the SQL.
absl::StatusOr<PgResult> PgExec(PGconn* conn, const std::string& sql, const PgParams& params = PgParams());

/// Runs SQL without parameters or results (may hold several statements).
absl::Status PgExecScript(PGconn* conn, const std::string& sql);

/// A DSN with any password replaced by "***" (logs and error messages).
std::string RedactDsn(const std::string& dsn);

}  // namespace quark::server
