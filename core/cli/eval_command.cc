// quark eval: perplexity of a model folder or a GGUF file on a text (the project's protocol, see
// core/runtime/perplexity.h), streamed layer by layer so that any model size evaluates in about one layer of memory.
#include <iomanip>
#include <iostream>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/cli/command_registry.h"
#include "core/cli/eval_kld.h"
#include "core/cli/eval_model.h"
#include "core/cli/eval_tasks.h"
#include "core/runtime/perplexity.h"

namespace quark::cli {
namespace {

int RunEval(const EvalArgs& args) {
  if (!args.tasks.empty()) return RunTaskEval(args);
  if (args.kld) {
    if (args.text.empty() == args.token_ids.empty()) {
      std::cerr << "quark eval: give exactly one of --text or --token-ids\n";
      return kExitBadInput;
    }
    return RunKldEval(args);
  }
  if (args.text.empty() == args.token_ids.empty()) {
    std::cerr << "quark eval: give exactly one of --text or --token-ids\n";
    return kExitBadInput;
  }
  auto options = EvalStreamerOptions(args);
  if (!options.ok()) return EvalFailure(options.status());
  auto model = OpenEvalModel(args.model, *options);
  if (!model.ok()) {
    std::cerr << "quark eval: " << model.status().message() << "\n";
    return kExitBadInput;
  }
  auto ids = EvalInputIds(args.text, args.token_ids, *model);
  if (!ids.ok()) {
    std::cerr << "quark eval: " << ids.status().message() << "\n";
    return kExitBadInput;
  }
  runtime::PerplexityOptions ppl_options;
  ppl_options.seq_len = args.seq_len;
  ppl_options.max_windows = args.max_windows;
  ppl_options.hooks = model->hooks;
  auto result = runtime::EvaluatePerplexity(*model->streamer, *ids, ppl_options);
  if (!result.ok()) {
    std::cerr << "quark eval: " << result.status().message() << "\n";
    return result.status().code() == absl::StatusCode::kInvalidArgument ? kExitBadInput : kExitFailure;
  }
  if (args.json) {
    nlohmann::json out = {{"tokens", result->tokens}, {"windows", result->windows}, {"seq_len", result->seq_len},
                          {"mean_nll", result->mean_nll}, {"ppl", result->ppl}};
    std::cout << out.dump() << "\n";
  } else {
    std::cout << "tokens:     " << result->tokens << "\nwindows:    " << result->windows << "\nseq_len:    "
              << result->seq_len << "\nmean_nll:   " << std::setprecision(6) << std::fixed << result->mean_nll
              << "\nperplexity: " << result->ppl << "\n";
  }
  return kExitOk;
}

void SetupEvalCommand(CLI::App& app) {
  auto args = std::make_shared<EvalArgs>();
  CLI::App* eval = app.add_subcommand("eval", "Perplexity of a model on a text (non-overlapping windows, streamed by layer)");
  eval->add_option("--model", args->model, "HF model folder (float, or an HF-quark or compressed-tensors export: packed weights and its activation quantization) or a GGUF file (with --text: the "
                  "tokenizer.model beside it)")->required();
  eval->add_option("--text", args->text, "text file, encoded whole as [BOS] + tokens");
  eval->add_option("--token-ids", args->token_ids, "pre-tokenized ids (whitespace/comma separated) instead of --text");
  eval->add_option("--seq-len", args->seq_len, "window length L (default min(2048, max_position_embeddings))")
      ->check(CLI::NonNegativeNumber);
  eval->add_option("--max-windows", args->max_windows, "evaluate only the first N windows (0 = all)")
      ->check(CLI::NonNegativeNumber);
  eval->add_option("--dtype", args->dtype, "compute dtype: f32 (default) or bf16");
  eval->add_option("--device", args->device,
                   "where the layers, activations and head live: cpu (default), cuda, cuda:N");
  eval->add_flag("--json", args->json, "print one JSON object {tokens, windows, seq_len, mean_nll, ppl}");
  eval->add_flag("--kld", args->kld, "KL divergence against --reference as llama-perplexity --kl-divergence: chunks of "
                 "--seq-len tokens (default 512), --max-windows chunks, the second half of each scored");
  eval->add_option("--reference", args->reference, "the float model --kld compares with (HF folder or GGUF)");
  eval->add_option("--tasks", args->tasks, "lm-eval tasks, comma separated: arc_easy, arc_challenge, piqa, winogrande, "
                   "mmlu, lambada_openai, gsm8k (scored as lm-evaluation-harness does; gsm8k generates greedily with a KV "
                   "cache, the whole model in memory)");
  eval->add_option("--limit", args->limit, "--tasks: the first N examples of each task (mmlu: of each subject)")
      ->check(CLI::NonNegativeNumber);
  eval->add_option("--num-fewshot", args->num_fewshot, "--tasks: few-shot examples (default: lm-eval's per task, 5 for mmlu and gsm8k), "
                 "drawn from the task's own file without the evaluated example (core/eval/fewshot.h)");
  eval->add_option("--tasks-dir", args->tasks_dir, "--tasks: the task files (default ../shared/fixtures/tasks)");
  eval->add_flag("--log-samples", args->log_samples, "--tasks --json: each request's context, continuation, "
                 "tokens and token log-probs");
  eval->callback([args] { SetExitCode(RunEval(*args)); });
}

const CommandRegistration kEvalCommand(SetupEvalCommand);

}  // namespace
}  // namespace quark::cli
