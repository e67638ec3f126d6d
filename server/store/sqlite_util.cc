#include "server/store/sqlite_util.h"

#include <fcntl.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace quark::server {
namespace {

absl::Status SqliteError(sqlite3* db, int rc, std::string_view what) {
  const char* message = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  std::string text = absl::StrCat("sqlite: ", std::string(what), ": ", message, " (code ", rc, ")");
  if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) return absl::UnavailableError(text);
  if (rc == SQLITE_CONSTRAINT) return absl::AlreadyExistsError(text);
  return absl::InternalError(text);
}

}  // namespace

Statement& Statement::Bind(int index, int64_t value) {
  sqlite3_bind_int64(stmt_.get(), index, value);
  return *this;
}

Statement& Statement::Bind(int index, std::string_view text) {
  sqlite3_bind_text(stmt_.get(), index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  return *this;
}

Statement& Statement::BindBlob(int index, const std::string& bytes) {
  sqlite3_bind_blob(stmt_.get(), index, bytes.data(), static_cast<int>(bytes.size()), SQLITE_TRANSIENT);
  return *this;
}

Statement& Statement::BindNull(int index) {
  sqlite3_bind_null(stmt_.get(), index);
  return *this;
}

absl::StatusOr<bool> Statement::Step() {
  int rc = sqlite3_step(stmt_.get());
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return SqliteError(db_, rc, sqlite3_sql(stmt_.get()));
}

absl::Status Statement::Run() {
  while (true) {
    absl::StatusOr<bool> row = Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::OkStatus();
  }
}

void Statement::Reset() {
  sqlite3_reset(stmt_.get());
  sqlite3_clear_bindings(stmt_.get());
}

int64_t Statement::ColumnInt(int column) const { return sqlite3_column_int64(stmt_.get(), column); }

std::string Statement::ColumnText(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_.get(), column);
  return text == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(text));
}

std::string Statement::ColumnBlob(int column) const {
  const void* data = sqlite3_column_blob(stmt_.get(), column);
  int size = sqlite3_column_bytes(stmt_.get(), column);
  return data == nullptr ? std::string() : std::string(static_cast<const char*>(data), size);
}

bool Statement::ColumnIsNull(int column) const {
  return sqlite3_column_type(stmt_.get(), column) == SQLITE_NULL;
}

absl::StatusOr<SqliteDb> OpenSqlite(const std::string& path) {
  // A new store is created 0600 (jobs hold tenants' URIs and labels); SQLite gives its -wal and -shm files the
  // database file's mode. An existing file keeps its mode.
  if (path != ":memory:" && !path.empty()) {
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) close(fd);
  }
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                           nullptr);
  SqliteDb db(raw);
  if (rc != SQLITE_OK) return SqliteError(db.get(), rc, absl::StrCat("open ", path));
  sqlite3_busy_timeout(db.get(), 5000);
  // WAL + synchronous=NORMAL: a committed transaction survives kill -9 of the process (the WAL is written
  // before commit returns); only a power loss may drop the last few commits.
  absl::Status status = Exec(db.get(), "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;");
  if (!status.ok()) return status;
  return db;
}

absl::StatusOr<Statement> Prepare(sqlite3* db, std::string_view sql) {
  sqlite3_stmt* raw = nullptr;
  int rc = sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT, &raw,
                              nullptr);
  std::unique_ptr<sqlite3_stmt, SqliteFinalizer> stmt(raw);
  if (rc != SQLITE_OK) return SqliteError(db, rc, absl::StrCat("prepare ", std::string(sql)));
  return Statement(db, std::move(stmt));
}

absl::Status Exec(sqlite3* db, const std::string& sql) {
  char* error = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  if (rc == SQLITE_OK) return absl::OkStatus();
  std::string message = error != nullptr ? error : sqlite3_errstr(rc);
  sqlite3_free(error);
  return absl::InternalError(absl::StrCat("sqlite: ", sql.substr(0, 80), ": ", message));
}

Transaction::~Transaction() {
  if (open_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

absl::Status Transaction::Begin() {
  absl::Status status = Exec(db_, "BEGIN IMMEDIATE");
  open_ = status.ok();
  return status;
}

absl::Status Transaction::Commit() {
  absl::Status status = Exec(db_, "COMMIT");
  if (status.ok()) open_ = false;
  return status;
}

}  // namespace quark::server
