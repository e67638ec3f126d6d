// quark presets [--json] [--show NAME]: the named schemes and what each quantizes.
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "core/cli/command_registry.h"
#include "core/config/config_json.h"
#include "core/config/presets.h"
#include "core/config/quark_json.h"

namespace quark::cli {
namespace {

struct PresetsOptions {
  bool json = false;
  std::string show;
};

int RunPresets(const PresetsOptions& options) {
  if (!options.show.empty()) {
    auto config = PresetConfig(options.show);
    if (!config.ok()) {
      std::cerr << "quark presets: " << config.status().message() << "\n";
      return kExitBadInput;
    }
    std::cout << ConfigToQuarkJson(*config).dump(2) << "\n";
    return kExitOk;
  }
  if (options.json) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const auto& p : AllPresets()) {
      out.push_back({{"name", p.name}, {"description", p.description}, {"legacy", p.legacy},
                     {"quantization_config", ConfigToQuarkJson(p.config)}});
    }
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  for (const auto& p : AllPresets()) {
    std::cout << fmt::format("{:<46} {}{}\n", p.name, p.legacy ? "(legacy) " : "", p.description);
  }
  std::cout << "\nKV-cache options (--kv-cache-dtype): fp8, int8\n";
  return kExitOk;
}

const CommandRegistration kPresets([](CLI::App& app) {
  auto options = std::make_shared<PresetsOptions>();
  auto* command = app.add_subcommand("presets", "list the named quantization schemes");
  command->add_flag("--json", options->json, "every preset with its full quantization_config");
  command->add_option("--show", options->show, "print one preset's quantization_config");
  command->callback([options] { SetExitCode(RunPresets(*options)); });
});

}  // namespace
}  // namespace quark::cli
