// quark make-model: a synthetic HF model folder with seeded random weights in real shapes.
#include <iostream>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "core/cli/command_registry.h"
#include "core/runtime/synthetic_model.h"

namespace quark::cli {
namespace {

int RunMakeModel(const runtime::SyntheticModelOptions& options) {
  const absl::Status status = runtime::MakeSyntheticModel(options);
  if (!status.ok()) {
    std::cerr << "quark make-model: " << status.message() << "\n";
    return status.code() == absl::StatusCode::kInvalidArgument ? kExitBadInput : kExitFailure;
  }
  std::cout << "wrote " << options.arch << " " << options.shape << " (" << options.dtype << ", seed " << options.seed
            << ") to " << options.out_dir << "\n";
  return kExitOk;
}

void Setup(CLI::App& app) {
  auto options = std::make_shared<runtime::SyntheticModelOptions>();
  CLI::App* cmd = app.add_subcommand("make-model", "Write a synthetic HF model (seeded random weights, real shapes)");
  cmd->add_option("--arch", options->arch, "llama, mistral or opt")->required();
  cmd->add_option("--shape", options->shape, "tiny, llama-2-7b, llama-2-13b, llama-3-8b, llama-3.1-8b, mistral-7b, opt-125m, opt-1.3b, opt-6.7b")
      ->required();
  cmd->add_option("--dtype", options->dtype, "f32, bf16 (default) or f16");
  cmd->add_option("--seed", options->seed, "random seed (default 0)");
  cmd->add_option("--out", options->out_dir, "output folder")->required();
  cmd->add_option("--tokenizer", options->tokenizer_path, "SentencePiece model to copy as tokenizer.model");
  cmd->add_option("--max-shard-bytes", options->max_shard_bytes, "shard size limit (default 5e9)");
  cmd->callback([options] { SetExitCode(RunMakeModel(*options)); });
}

const CommandRegistration kRegistration(Setup);

}  // namespace
}  // namespace quark::cli
