// The model `quark eval` evaluates (and its --reference): an HF folder (float, or an HF-quark export read back with
// its activation quantization), or a GGUF file dequantized on load, with the tokenizer that goes with it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/eval/opened_model.h"

namespace quark::cli {

/// `quark eval`'s flags.
struct EvalArgs {
  std::string model;
  std::string text;
  std::string token_ids;
  int64_t seq_len = 0;
  int64_t max_windows = 0;
  std::string dtype = "f32";
  std::string device = "cpu";
  bool json = false;
  std::string reference;  // --reference FLOAT_MODEL (with --kld)
  bool kld = false;
  std::string tasks;      // --tasks a,b,c
  int64_t limit = 0;
  int64_t num_fewshot = -1;  // -1: each task's default
  std::string tasks_dir = "../shared/fixtures/tasks";
  bool log_samples = false;  // per request: context, continuation, tokens and their log-probs
};

/// The streamer options of --dtype, or InvalidArgument naming it.
absl::StatusOr<runtime::StreamerOptions> EvalStreamerOptions(const EvalArgs& args);

/// Prints `quark eval: MESSAGE` and returns the exit code for `status` (bad input 2, otherwise 1).
int EvalFailure(const absl::Status& status);

/// The model --model / --reference names (core/eval/opened_model.h).
using EvalModel = eval::OpenedModel;

inline absl::StatusOr<EvalModel> OpenEvalModel(const std::string& model, const runtime::StreamerOptions& options) {
  return eval::OpenModel(model, options);
}

inline absl::StatusOr<std::unique_ptr<runtime::Tokenizer>> OpenEvalTokenizer(const EvalModel& model) {
  return eval::OpenModelTokenizer(model);
}

/// Token ids of a --token-ids file (taken as they are) or of a --text file ([BOS] + encode(text)).
absl::StatusOr<std::vector<int64_t>> EvalInputIds(const std::string& text_file, const std::string& token_ids_file,
                                                  const EvalModel& model);

}  // namespace quark::cli
