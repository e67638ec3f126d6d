#include "core/cli/eval_tasks.h"

#include <cstdio>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/cli/command_registry.h"
#include "core/eval/eval_json.h"
#include "core/eval/fewshot.h"
#include "core/eval/task_scoring.h"

namespace quark::cli {
namespace {

std::vector<std::string> SplitNames(const std::string& list) {
  std::vector<std::string> names;
  std::stringstream in(list);
  std::string name;
  while (std::getline(in, name, ',')) {
    if (!name.empty()) names.push_back(name);
  }
  return names;
}

}  // namespace

int RunTaskEval(const EvalArgs& args) {
  const std::vector<std::string> names = SplitNames(args.tasks);
  std::vector<eval::TaskInfo> tasks;
  for (const auto& name : names) {
    auto task = eval::FindTask(name);
    if (!task.ok()) return EvalFailure(task.status());
    tasks.push_back(*task);
  }
  if (tasks.empty()) return EvalFailure(absl::InvalidArgumentError("--tasks: no task named"));
  auto options = EvalStreamerOptions(args);
  if (!options.ok()) return EvalFailure(options.status());
  auto model = OpenEvalModel(args.model, *options);
  if (!model.ok()) return EvalFailure(absl::InvalidArgumentError("--model: " + std::string(model.status().message())));
  auto tokenizer = OpenEvalTokenizer(*model);
  if (!tokenizer.ok()) return EvalFailure(tokenizer.status());
  nlohmann::json out = nlohmann::json::array();
  for (const auto& task : tasks) {
    int64_t num_fewshot = args.num_fewshot;
    auto docs = eval::LoadFewshotTaskDocs(task, args.tasks_dir, args.limit, num_fewshot);
    if (!docs.ok()) return EvalFailure(docs.status());
    eval::TaskScoreOptions score_options;
    score_options.hooks = model->hooks;
    auto result = eval::ScoreTask(task, *docs, *model->streamer, **tokenizer, score_options);
    if (!result.ok()) return EvalFailure(result.status());
    result->num_fewshot = num_fewshot;
    if (result->truncated > 0) {
      std::cerr << "quark eval: " << task.name << ": " << result->truncated << " requests longer than the model's "
                << result->max_length << " tokens were left-truncated (as lm-eval does)\n";
    }
    if (args.json) {
      out.push_back(eval::TaskResultJson(*result, *docs, args.log_samples));
      continue;
    }
    for (const auto& [name, m] : result->metrics) {
      std::printf("%-16s %-10s %8.4f ± %s  (%zu examples, %.1f s)\n", task.name.c_str(), name.c_str(), m.value,
                  m.has_stderr ? std::to_string(m.stderr_value).c_str() : "n/a", result->examples.size(),
                  result->seconds);
    }
    if (result->generated_tokens > 0) {
      std::printf("%-16s generated %lld tokens in %.1f s (%.2f tokens/s, prompts included in the time)\n",
                  task.name.c_str(), static_cast<long long>(result->generated_tokens), result->seconds,
                  static_cast<double>(result->generated_tokens) / result->seconds);
    }
  }
  if (args.json) std::cout << nlohmann::json({{"tasks", out}}).dump() << "\n";
  return kExitOk;
}

}  // namespace quark::cli
