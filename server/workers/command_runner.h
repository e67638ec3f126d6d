// Runs a short-lived command (sbatch, squeue, scancel) by argv, never through a shell, with a time limit, and
// returns what it printed. quarkd blocks its termination signals in every thread; the child gets an empty mask
// so that the command can be stopped normally.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace quark::server {

struct CommandResult {
  int exit_code = 0;  // the command's exit status (a command killed by a signal is an error instead)
  std::string out;    // stdout
  std::string err;    // stderr
};

/// argv[0] is looked up in PATH. NOT_FOUND when it cannot be started; DEADLINE_EXCEEDED (the command killed)
/// after `timeout`; INTERNAL when a signal ended it. Each stream keeps at most `max_bytes`.
absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv, absl::Duration timeout,
                                         size_t max_bytes = 1 << 20);

/// "sbatch --parsable ..." for messages: the arguments joined with spaces, the ones with spaces quoted.
std::string CommandLine(const std::vector<std::string>& argv);

}  // namespace quark::server
