// `quark generate`: greedy generation with the KV cache (core/eval/greedy_generation.h) from a prompt or token ids,
// the path GSM8K scoring takes, for checking against other runtimes (tests/node/gguf_generation_test.mjs).
//
//   quark generate --model M (--prompt TEXT | --token-ids FILE) [--max-new-tokens 32] [--until S ...] [--json]
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include <CLI/CLI.hpp>

#include "core/cli/command_registry.h"
#include "core/cli/eval_model.h"
#include "core/eval/generation_task.h"
#include "core/eval/greedy_generation.h"
#include "core/runtime/tokenizer.h"

namespace quark::cli {
namespace {

struct GenerateArgs {
  std::string model;
  std::string prompt;
  std::string token_ids;
  int64_t max_new_tokens = 32;
  std::vector<std::string> until;
  bool json = false;
};

int Run(const GenerateArgs& args) {
  if (args.prompt.empty() == args.token_ids.empty()) {
    return EvalFailure(absl::InvalidArgumentError("--prompt / --token-ids: give exactly one"));
  }
  if (args.max_new_tokens < 1) {
    return EvalFailure(absl::InvalidArgumentError("--max-new-tokens: " + std::to_string(args.max_new_tokens) +
                                                  " is not >= 1"));
  }
  auto model = OpenEvalModel(args.model, {});
  if (!model.ok()) return EvalFailure(absl::InvalidArgumentError("--model: " + std::string(model.status().message())));
  auto tokenizer = OpenEvalTokenizer(*model);
  if (!tokenizer.ok()) return EvalFailure(tokenizer.status());
  std::vector<int64_t> ids;
  if (!args.token_ids.empty()) {
    auto sequences = runtime::ReadTokenIdFile(args.token_ids);
    if (!sequences.ok()) return EvalFailure(sequences.status());
    for (const auto& s : *sequences) ids.insert(ids.end(), s.begin(), s.end());
  } else {
    auto encoded = (*tokenizer)->EncodeWithBos(args.prompt);
    if (!encoded.ok()) return EvalFailure(encoded.status());
    ids = *std::move(encoded);
  }
  if (ids.empty()) return EvalFailure(absl::InvalidArgumentError("--token-ids: no tokens"));
  eval::KvCacheOptions options;
  options.max_tokens = static_cast<int64_t>(ids.size()) + args.max_new_tokens;
  options.memory_budget = eval::PhysicalMemoryBytes();
  auto decoder = eval::KvCacheDecoder::Load(*model->streamer, model->hooks, options);
  if (!decoder.ok()) return EvalFailure(decoder.status());
  auto generation = eval::GreedyContinue(**decoder, **tokenizer, ids, args.until, args.max_new_tokens);
  if (!generation.ok()) return EvalFailure(generation.status());
  if (args.json) {
    std::cout << nlohmann::json({{"context_tokens", generation->context_tokens},
                                 {"tokens", generation->tokens},
                                 {"text", generation->text}})
                     .dump()
              << "\n";
  } else {
    std::cout << generation->text << "\n";
  }
  return kExitOk;
}

void SetupGenerateCommand(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "Greedy generation with a KV cache (the whole model in memory)");
  cmd->add_option("--model", args->model, "HF model folder, HF-quark export or GGUF file")->required();
  cmd->add_option("--prompt", args->prompt, "text, encoded as [BOS] + tokens");
  cmd->add_option("--token-ids", args->token_ids, "token ids (whitespace/comma separated), taken as they are");
  cmd->add_option("--max-new-tokens", args->max_new_tokens, "tokens to generate at most (default 32)");
  cmd->add_option("--until", args->until, "stop sequence (repeatable); the text is cut at it");
  cmd->add_flag("--json", args->json, "print {context_tokens, tokens, text}");
  cmd->callback([args] { SetExitCode(Run(*args)); });
}

const CommandRegistration kGenerateCommand(SetupGenerateCommand);

}  // namespace
}  // namespace quark::cli
