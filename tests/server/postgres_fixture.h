// A real PostgreSQL for tests: initdb + pg_ctl on a temporary folder, listening only on a unix socket in it.
// PostgreSQL refuses to run as root, so as root (CI) the server runs as `nobody` through runuser.
#pragma once

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/server/test_util.h"

namespace quark::server::testing {

class TestPostgres {
 public:
  /// The newest /usr/lib/postgresql/N/bin holding initdb and pg_ctl; "" when PostgreSQL is not installed.
  static std::string BinDir() {
    std::string best;
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator("/usr/lib/postgresql", error)) {
      std::string bin = entry.path().string() + "/bin";
      if (std::filesystem::exists(bin + "/initdb") && std::filesystem::exists(bin + "/pg_ctl") && bin > best) best = bin;
    }
    return best;
  }

  /// initdb and start; returns "" on success, else what failed (with the server log's tail).
  std::string Start() {
    bin_ = BinDir();
    if (bin_.empty()) return "no PostgreSQL binaries under /usr/lib/postgresql";
    std::string pattern = "/tmp/quark-pg-XXXXXX";  // short: the socket path must stay under 108 bytes
    if (mkdtemp(pattern.data()) == nullptr) return "mkdtemp failed";
    dir_ = pattern;
    if (getuid() == 0) {
      passwd* nobody = getpwnam("nobody");
      if (nobody == nullptr) return "no user nobody to run PostgreSQL as";
      if (chown(dir_.c_str(), nobody->pw_uid, nobody->pw_gid) != 0) return "chown of " + dir_ + " failed";
      as_ = "runuser -u nobody -- ";
    }
    if (!Run(bin_ + "/initdb -D " + dir_ + "/data -A trust -U quark --no-sync -E UTF8 >" + dir_ + "/initdb.log 2>&1")) {
      return "initdb failed: " + Tail(dir_ + "/initdb.log");
    }
    options_ = "-k " + dir_ + " -c listen_addresses='' -p 5432 -c fsync=off -c max_connections=200";
    if (!Run(bin_ + "/pg_ctl -D " + dir_ + "/data -o \"" + options_ + "\" -l " + dir_ + "/server.log -w start >/dev/null")) {
      return "pg_ctl start failed: " + Tail(dir_ + "/server.log");
    }
    started_ = true;
    return "";
  }

  /// Stops the server at once (as a crash would) and starts it again: every client connection dies without a word.
  std::string Restart() {
    Run(bin_ + "/pg_ctl -D " + dir_ + "/data -m immediate stop >/dev/null 2>&1");
    if (!Run(bin_ + "/pg_ctl -D " + dir_ + "/data -o \"" + options_ + "\" -l " + dir_ + "/server.log -w start >/dev/null")) {
      return "pg_ctl start failed: " + Tail(dir_ + "/server.log");
    }
    return "";
  }

  /// A libpq URI for database "postgres" as user quark (trust authentication on the socket).
  std::string Dsn() const { return "postgres:///postgres?host=" + dir_ + "&port=5432&user=quark"; }
  const std::string& dir() const { return dir_; }
  std::string Log() const { return Tail(dir_ + "/server.log"); }

  /// Runs SQL through psql; true on success.
  bool Psql(const std::string& sql) const {
    return Run("psql -q -X -v ON_ERROR_STOP=1 -h " + dir_ + " -p 5432 -U quark postgres -c \"" + sql + "\" >/dev/null 2>&1",
               false);
  }

  ~TestPostgres() {
    if (started_) Run(bin_ + "/pg_ctl -D " + dir_ + "/data -m immediate stop >/dev/null 2>&1");
    if (!dir_.empty()) {
      std::error_code error;
      std::filesystem::remove_all(dir_, error);
    }
  }

 private:
  bool Run(const std::string& command, bool as_owner = true) const {
    return std::system(((as_owner ? as_ : "") + command).c_str()) == 0;
  }
  static std::string Tail(const std::string& path) {
    std::ifstream in(path);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return text.size() > 2000 ? text.substr(text.size() - 2000) : text;
  }

  std::string bin_;
  std::string dir_;
  std::string as_;
  std::string options_;
  bool started_ = false;
};

}  // namespace quark::server::testing
