// Runs the built `quark` binary for the CLI tests (QUARK_BINARY_DIR names the build folder; empty when unset).
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

namespace quark::testing {

inline std::string QuarkBinary() {
  const char* bin = std::getenv("QUARK_BINARY_DIR");
  return bin ? std::string(bin) + "/core/cli/quark" : std::string();
}

struct CliRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

/// Runs a shell command line, its stderr merged into its stdout.
inline CliRun RunShell(const std::string& command) {
  CliRun run;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen((command + " 2>&1").c_str(), "r"), pclose);
  if (!pipe) return run;
  std::array<char, 4096> buffer{};
  while (fgets(buffer.data(), buffer.size(), pipe.get()) != nullptr) run.output += buffer.data();
  const int status = pclose(pipe.release());
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

inline CliRun Quark(const std::string& args) { return RunShell(QuarkBinary() + " " + args); }

}  // namespace quark::testing
