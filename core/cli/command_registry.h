// Subcommands of the offline `quark` CLI register themselves here, one file each
// (<name>_command.cc), so adding a command never touches main.cc.
#pragma once

#include <functional>
#include <vector>

namespace CLI {
class App;
}

namespace quark::cli {

/// Adds one subcommand to the app; its callback reports its exit code through SetExitCode().
using CommandSetup = std::function<void(CLI::App& app)>;

/// A static instance in a command's file registers it before main() runs.
struct CommandRegistration {
  explicit CommandRegistration(CommandSetup setup);
};

const std::vector<CommandSetup>& RegisteredCommands();

/// Exit codes shared by every command: 0 ok, 1 the work failed, 2 bad usage or input (the message names the field).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitBadInput = 2;

void SetExitCode(int code);
int ExitCode();

}  // namespace quark::cli
