// quark eval --kld --reference FLOAT_MODEL: KL divergence of --model against the float model
// (llama-perplexity --kl-divergence's chunks and figures, core/eval/kld_eval.h).
#pragma once

#include "core/cli/eval_model.h"

namespace quark::cli {

/// Runs the KLD evaluation of `args` and prints it (a table, or one JSON object with --json). Returns the exit code.
int RunKldEval(const EvalArgs& args);

}  // namespace quark::cli
