// Runs the built `quark` binary for the CLI tests (QUARK_BINARY_DIR names the build folder; empty when unset).
#pragma once

#include <sys/wait.h>

#include <array>
#include <cctype>
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

/// `env` options that start a process as no operator and no earlier OpenBLAS core guard left it
/// (core/base/blas_core.h).
inline constexpr const char* kUnsetBlasGuardVariables =
    "-u OPENBLAS_CORETYPE -u QUARK_OPENBLAS_CORETYPE_CHOSEN -u QUARK_TEST_BLAS_CORETYPE_IS_DETECTED "
    "-u QUARK_ALLOW_GENERIC_BLAS";

/// The guard's generic-core path forced on a CPU this OpenBLAS knows: OPENBLAS_CORETYPE=Prescott makes OpenBLAS load
/// its SSE3 kernels, and the test hook makes the guard take that core as detected, not as an operator's choice.
inline constexpr const char* kForcedGenericBlasCore =
    "QUARK_TEST_BLAS_CORETYPE_IS_DETECTED=1 OPENBLAS_CORETYPE=Prescott";

/// The JSON document a `--json` run printed, without the lines the process wrote to stderr around it (the OpenBLAS
/// core guard's notice and log lines, on CPUs whose OpenBLAS falls back to Prescott): from the first line that opens a
/// document, leaving out lines that start as the guard's notice ("quark: ") or a log line ("2026-11-30 ...") do.
inline std::string JsonPart(const std::string& output) {
  const auto is_stderr_line = [](const std::string& line) {
    return line.rfind("quark: ", 0) == 0 ||
           (line.size() > 10 && line[4] == '-' && line[7] == '-' && line[10] == ' ' && std::isdigit(line[0]));
  };
  std::string json;
  bool started = false;
  size_t at = 0;
  while (at < output.size()) {
    size_t newline = output.find('\n', at);
    if (newline == std::string::npos) newline = output.size();
    const std::string line = output.substr(at, newline - at);
    at = newline + 1;
    if (!started) started = !line.empty() && (line[0] == '{' || line[0] == '[');
    if (started && !is_stderr_line(line)) json += line + "\n";
  }
  return started ? json : output;
}

}  // namespace quark::testing
