// quark make-model: a synthetic HF model folder with seeded random weights in real shapes, or (--train) a small
// Llama trained in-process on a text.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "core/cli/command_registry.h"
#include "core/runtime/llama_trainer.h"
#include "core/runtime/synthetic_model.h"

namespace quark::cli {
namespace {

int ExitCodeOf(const absl::Status& status) {
  return status.code() == absl::StatusCode::kInvalidArgument || status.code() == absl::StatusCode::kNotFound
             ? kExitBadInput
             : kExitFailure;
}

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

int RunTrainModel(const runtime::TrainedModelOptions& options) {
  auto config = runtime::TrainedModelConfig(options);
  if (!config.ok()) {
    std::cerr << "quark make-model: " << config.status().message() << "\n";
    return ExitCodeOf(config.status());
  }
  std::cout << "training llama " << options.model.shape << " (hidden " << config->hidden_size << ", "
            << config->num_hidden_layers << " layers, " << config->num_attention_heads << "/"
            << config->num_key_value_heads << " heads, seed " << options.model.seed << ") on " << options.text_path
            << ": " << options.training.steps << " steps of " << options.training.batch << " x "
            << options.training.seq_len << " tokens" << std::endl;
  const int64_t every = std::max<int64_t>(1, options.training.steps / 10);
  auto report = runtime::MakeTrainedModel(options, [every](const runtime::TrainingProgress& p) {
    if (p.step % every != 0 && p.step != p.steps) return;
    char line[128];
    std::snprintf(line, sizeof(line), "step %lld/%lld  loss %.4f  lr %.2e  %.1f s", static_cast<long long>(p.step),
                  static_cast<long long>(p.steps), p.loss, p.lr, p.seconds);
    std::cout << line << std::endl;
  });
  if (!report.ok()) {
    std::cerr << "quark make-model: " << report.status().message() << "\n";
    return ExitCodeOf(report.status());
  }
  std::cout << "trained " << report->parameters << " parameters on " << report->text_tokens << " tokens in "
            << static_cast<int64_t>(report->seconds + 0.5) << " s (loss " << report->final_loss
            << " over the last 10% of steps); wrote " << options.model.dtype << " to " << options.model.out_dir << "\n";
  return kExitOk;
}

void SetupMakeModelCommand(CLI::App& app) {
  auto options = std::make_shared<runtime::TrainedModelOptions>();
  runtime::SyntheticModelOptions& model = options->model;
  runtime::LlamaTrainingOptions& training = options->training;
  CLI::App* cmd = app.add_subcommand(
      "make-model", "Write a synthetic HF model (seeded random weights, real shapes), or train a small Llama (--train)");
  cmd->add_option("--arch", model.arch, "llama, mistral, qwen3, phi3, gemma2, gemma3_text, opt, mixtral, qwen2_moe, qwen3_moe, deepseek_v3, gpt_oss or llama4")->required();
  cmd->add_option("--shape", model.shape, "tiny, llama-2-7b, llama-2-13b, llama-3-8b, llama-3.1-8b, mistral-7b, qwen3-8b, phi-3-mini, opt-125m, opt-1.3b, opt-6.7b, mixtral-8x7b, qwen1.5-moe-a2.7b, qwen3-30b-a3b, deepseek-v3, deepseek-v3-4l, tiny-q-proj (deepseek_v3), gpt-oss-20b, gpt-oss-20b-2l, gpt-oss-120b, gpt-oss-120b-2l (gpt_oss), llama-4-scout, llama-4-scout-2l, llama-4-maverick (llama4)")
      ->required();
  cmd->add_option("--dtype", model.dtype, "f32, bf16 (default) or f16");
  cmd->add_option("--seed", model.seed, "random seed (default 0)");
  cmd->add_option("--out", model.out_dir, "output folder")->required();
  cmd->add_option("--tokenizer", model.tokenizer_path, "SentencePiece model to copy as tokenizer.model");
  cmd->add_option("--max-shard-bytes", model.max_shard_bytes, "shard size limit (default 5e9)");
  CLI::Option* train = cmd->add_option(
      "--train", options->text_path,
      "train the model on this text (llama only; needs --tokenizer): AdamW on causal-LM cross-entropy, seeded by --seed");
  cmd->add_option("--steps", training.steps, "training steps (default 200)")->needs(train);
  cmd->add_option("--lr", training.lr, "peak learning rate (default 3e-3; 5% warm-up, cosine to 10%)")->needs(train);
  cmd->add_option("--seq-len", training.seq_len, "tokens per training sample (default 128)")->needs(train);
  cmd->add_option("--batch", training.batch, "samples per step (default 16)")->needs(train);
  cmd->add_option("--hidden", options->hidden_size,
                  "hidden size, a multiple of 32 (heads of 32 dims, half as many KV heads; default: the shape's)")
      ->needs(train);
  cmd->add_option("--layers", options->num_layers, "decoder layers (default: the shape's)")->needs(train);
  cmd->callback([options, train] {
    SetExitCode(train->count() > 0 ? RunTrainModel(*options) : RunMakeModel(options->model));
  });
}

const CommandRegistration kMakeModelCommand(SetupMakeModelCommand);

}  // namespace
}  // namespace quark::cli
