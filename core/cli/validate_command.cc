// quark validate (--scheme NAME | --config FILE) [--model DIR] [--json]: a dry run of a Config, alone or against
// a model: which module gets which spec, and every problem, each naming its field.
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/checkpoint/model_modules.h"
#include "core/cli/command_registry.h"
#include "core/cli/config_options.h"
#include "core/config/layer_plan.h"
#include "core/config/quark_json.h"
#include "core/config/validation.h"

namespace quark::cli {
namespace {

struct ValidateOptions {
  ConfigOptions config;
  std::string model;
  bool json = false;
};

std::string SpecSummary(const std::optional<QuantSpec>& s) {
  if (!s) return "-";
  std::string out = std::string(Name(s->dtype));
  out += "/" + std::string(Name(s->qscheme));
  if (s->group_size) out += fmt::format("/g{}", *s->group_size);
  if (s->is_dynamic) out += "/dyn";
  return out;
}

int RunValidate(const ValidateOptions& options) {
  auto config = options.config.Resolve();
  if (!config.ok()) {
    std::cerr << "quark validate: " << config.status().message() << "\n";
    return kExitBadInput;
  }
  std::vector<ModuleInfo> modules;
  if (!options.model.empty()) {
    auto listed = ListModelModules(options.model);
    if (!listed.ok()) {
      std::cerr << "quark validate: " << listed.status().message() << "\n";
      return kExitBadInput;
    }
    modules = *std::move(listed);
  }
  const auto issues = ValidateConfig(*config, options.model.empty() ? nullptr : &modules);
  const LayerPlan plan = BuildLayerPlan(*config, modules);
  const bool valid = ValidationStatus(issues).ok();
  if (options.json) {
    nlohmann::ordered_json out = {{"valid", valid}, {"errors", nlohmann::ordered_json::array()},
                                  {"warnings", nlohmann::ordered_json::array()}, {"layers", nlohmann::ordered_json::array()}};
    for (const auto& issue : issues) {
      out[issue.severity == ValidationIssue::Severity::kError ? "errors" : "warnings"].push_back(issue.ToString());
    }
    for (const auto& layer : plan.layers) {
      out["layers"].push_back({{"module", layer.module}, {"type", layer.module_type}, {"source", layer.SourceLabel()},
                               {"config", LayerConfigToQuarkJson(layer.config)}});
    }
    out["quantization_config"] = ConfigToQuarkJson(*config);
    std::cout << out.dump(2) << "\n";
  } else {
    for (const auto& layer : plan.layers) {
      std::cout << fmt::format("{:<44} {:<10} w={:<22} in={:<22} out={:<12} <- {}\n", layer.module, layer.module_type,
                               SpecSummary(layer.config.weight), SpecSummary(layer.config.input_tensors),
                               SpecSummary(layer.config.output_tensors), layer.SourceLabel());
    }
    for (const auto& issue : issues) {
      std::cout << (issue.severity == ValidationIssue::Severity::kError ? "error: " : "warning: ") << issue.ToString()
                << "\n";
    }
    std::cout << (valid ? "valid\n" : "invalid\n");
  }
  return valid ? kExitOk : kExitBadInput;
}

const CommandRegistration kValidate([](CLI::App& app) {
  auto options = std::make_shared<ValidateOptions>();
  auto* command = app.add_subcommand("validate", "check a Config, alone or against a model, without quantizing");
  options->config.AddTo(*command);
  command->add_option("--model", options->model, "an HF model folder to check shapes and patterns against");
  command->add_flag("--json", options->json, "machine-readable output");
  command->callback([options] { SetExitCode(RunValidate(*options)); });
});

}  // namespace
}  // namespace quark::cli
