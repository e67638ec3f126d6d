// quark: the engine without the daemon (like Quark's quantize_quark.py).
// Each subcommand lives in its own <name>_command.cc and registers itself.
#include <iostream>

#include <CLI/CLI.hpp>

#include "core/base/log.h"
#include "core/cli/command_registry.h"
#include "core/engine/engine_process.h"

int main(int argc, char** argv) {
  quark::StartEngineProcess(argc, argv);
  quark::log::Init(quark::log::Format::kText, "warn");
  CLI::App app{"quark: quantize, evaluate and inspect models offline"};
  app.require_subcommand(1);
  for (const auto& setup : quark::cli::RegisteredCommands()) setup(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : quark::cli::kExitBadInput;
  }
  return quark::cli::ExitCode();
}
