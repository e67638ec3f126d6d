// quark eval --tasks arc_easy,piqa [--limit N] [--num-fewshot K] [--json] [--log-samples]: task accuracy as
// lm-evaluation-harness scores it (core/eval/task_docs.h, task_scoring.h) on the task files of --tasks-dir.
#pragma once

#include "core/cli/eval_model.h"

namespace quark::cli {

int RunTaskEval(const EvalArgs& args);

}  // namespace quark::cli
