#include "server/store/pg_util.h"

#include <regex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace quark::server {
namespace {

std::string Shorten(const std::string& sql) {
  std::string flat;
  for (char c : sql) {
    if (c == '\n' || c == '\t') c = ' ';
    if (c == ' ' && !flat.empty() && flat.back() == ' ') continue;
    flat.push_back(c);
  }
  return flat.size() > 120 ? flat.substr(0, 117) + "..." : flat;
}

absl::Status ResultError(PGconn* conn, PGresult* result, const std::string& sql) {
  const char* state = result != nullptr ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  std::string code = state != nullptr ? state : "";
  std::string message = absl::StrCat("postgres: ", PQerrorMessage(conn), " [", code, "] in \"", Shorten(sql), "\"");
  while (!message.empty() && message.back() == '\n') message.pop_back();
  if (code == "40001" || code == "40P01") return absl::AbortedError(message);
  if (code == "23505") return absl::AlreadyExistsError(message);
  if (PQstatus(conn) != CONNECTION_OK || code.rfind("08", 0) == 0 || code == "57P01") {
    return absl::UnavailableError(message);
  }
  return absl::InternalError(message);
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

void PgParams::Push(std::optional<std::string> value, int format) {
  values_.push_back(std::move(value));
  formats_.push_back(format);
  Rebuild();
}

// The strings may move when values_ grows, so the pointer table is rebuilt after every push.
void PgParams::Rebuild() {
  pointers_.clear();
  lengths_.clear();
  for (const auto& value : values_) {
    pointers_.push_back(value ? value->data() : nullptr);
    lengths_.push_back(value ? static_cast<int>(value->size()) : 0);
  }
}

PgParams& PgParams::Add(int64_t value) {
  Push(absl::StrCat(value), 0);
  return *this;
}
PgParams& PgParams::Add(const std::string& text) {
  Push(text, 0);
  return *this;
}
PgParams& PgParams::AddBytes(const std::string& bytes) {
  Push(bytes, 1);
  return *this;
}
PgParams& PgParams::AddNull() {
  Push(std::nullopt, 0);
  return *this;
}

std::string PgResult::Text(int row, int column) const {
  return std::string(PQgetvalue(result_.get(), row, column), PQgetlength(result_.get(), row, column));
}

int64_t PgResult::Int(int row, int column) const {
  int64_t value = 0;
  if (!absl::SimpleAtoi(Text(row, column), &value)) return 0;
  return value;
}

bool PgResult::Bool(int row, int column) const { return Text(row, column) == "t"; }

std::string PgResult::Bytes(int row, int column) const {
  std::string text = Text(row, column);
  std::string out;
  if (text.size() < 2 || text[0] != '\\' || text[1] != 'x') return out;
  out.reserve((text.size() - 2) / 2);
  for (size_t i = 2; i + 1 < text.size(); i += 2) {
    int high = HexDigit(text[i]);
    int low = HexDigit(text[i + 1]);
    if (high < 0 || low < 0) return std::string();
    out.push_back(static_cast<char>(high << 4 | low));
  }
  return out;
}

int64_t PgResult::Affected() const {
  int64_t value = 0;
  return absl::SimpleAtoi(PQcmdTuples(result_.get()), &value) ? value : 0;
}

std::string RedactDsn(const std::string& dsn) {
  static const std::regex url_password("(://[^:/@]*:)[^@]*@");
  static const std::regex kv_password("(password\\s*=\\s*)\\S+");
  return std::regex_replace(std::regex_replace(dsn, url_password, "$1***@"), kv_password, "$1***");
}

absl::StatusOr<PgConn> ConnectPg(const std::string& dsn) {
  PgConn conn(PQconnectdb(dsn.c_str()));
  if (conn == nullptr || PQstatus(conn.get()) != CONNECTION_OK) {
    std::string message = conn ? PQerrorMessage(conn.get()) : "out of memory";
    while (!message.empty() && message.back() == '\n') message.pop_back();
    return absl::UnavailableError(absl::StrCat("store: cannot connect to \"", RedactDsn(dsn), "\": ", message));
  }
  return conn;
}

absl::StatusOr<PgResult> PgExec(PGconn* conn, const std::string& sql, const PgParams& params) {
  PGresult* raw = PQexecParams(conn, sql.c_str(), params.size(), nullptr, params.values(), params.lengths(),
                               params.formats(), 0);
  PgResult result(raw);
  ExecStatusType status = raw != nullptr ? PQresultStatus(raw) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) return ResultError(conn, raw, sql);
  return result;
}

absl::Status PgExecScript(PGconn* conn, const std::string& sql) {
  PGresult* raw = PQexec(conn, sql.c_str());
  PgResult result(raw);
  ExecStatusType status = raw != nullptr ? PQresultStatus(raw) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) return ResultError(conn, raw, sql);
  return absl::OkStatus();
}

}  // namespace quark::server
