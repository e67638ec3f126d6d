// quark outlier-twin --model DIR --output DIR [--channels 4] [--min-scale 40] [--max-scale 100] [--seed 0]
// The outlier twin of a small model (runtime/outlier_twin.h): the same float function, LLM-like activation outliers,
// for measuring what rotation, SmoothQuant, AWQ or an importance matrix gain.
#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>

#include "core/cli/command_registry.h"
#include "core/runtime/outlier_twin.h"

namespace quark::cli {
namespace {

int RunOutlierTwin(const runtime::OutlierTwinOptions& options) {
  const absl::Status status = runtime::MakeOutlierTwin(options);
  if (!status.ok()) {
    std::cerr << "quark outlier-twin: " << status.message() << "\n";
    return status.code() == absl::StatusCode::kInvalidArgument || status.code() == absl::StatusCode::kNotFound ||
                   status.code() == absl::StatusCode::kAlreadyExists
               ? kExitBadInput
               : kExitFailure;
  }
  std::cout << "wrote the outlier twin of " << options.model_dir << " (" << options.channels
            << " channels per norm scaled by " << options.min_scale << ".." << options.max_scale << ", seed "
            << options.seed << ") to " << options.out_dir << "\n";
  return kExitOk;
}

void SetupOutlierTwinCommand(CLI::App& app) {
  auto options = std::make_shared<runtime::OutlierTwinOptions>();
  CLI::App* cmd = app.add_subcommand(
      "outlier-twin", "Write a model's outlier twin: a few RMSNorm channels scaled up, the reading columns down");
  cmd->add_option("--model", options->model_dir, "HF model folder (llama, mistral, qwen2, qwen3)")->required();
  cmd->add_option("--output", options->out_dir, "output folder (must not exist)")->required();
  cmd->add_option("--channels", options->channels, "channels per norm (default 4)");
  cmd->add_option("--min-scale", options->min_scale, "smallest scale (default 40)");
  cmd->add_option("--max-scale", options->max_scale, "largest scale (default 100)");
  cmd->add_option("--seed", options->seed, "random seed of the channels and scales (default 0)");
  cmd->callback([options] { SetExitCode(RunOutlierTwin(*options)); });
}

const CommandRegistration kOutlierTwinCommand(SetupOutlierTwinCommand);

}  // namespace
}  // namespace quark::cli
