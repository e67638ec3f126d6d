#include "core/cli/command_registry.h"

namespace quark::cli {
namespace {

std::vector<CommandSetup>& MutableCommands() {
  static std::vector<CommandSetup> commands;
  return commands;
}

int g_exit_code = kExitOk;

}  // namespace

CommandRegistration::CommandRegistration(CommandSetup setup) { MutableCommands().push_back(std::move(setup)); }

const std::vector<CommandSetup>& RegisteredCommands() { return MutableCommands(); }

void SetExitCode(int code) { g_exit_code = code; }
int ExitCode() { return g_exit_code; }

}  // namespace quark::cli
