#include "core/cli/eval_kld.h"

#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "core/cli/command_registry.h"
#include "core/eval/eval_json.h"
#include "core/eval/kld_eval.h"

namespace quark::cli {
namespace {

void PrintTable(const eval::KldResult& r) {
  const eval::KldSummary& s = r.summary;
  std::printf("chunks: %lld of %lld tokens, n_ctx %lld, %lld tokens scored\n", static_cast<long long>(r.chunks),
              static_cast<long long>(r.input_tokens), static_cast<long long>(r.n_ctx),
              static_cast<long long>(s.tokens));
  std::printf("Mean PPL(Q)                : %10.6f ± %10.6f\n", s.ppl.value, s.ppl.error);
  std::printf("Mean PPL(base)             : %10.6f ± %10.6f\n", s.ppl_base.value, s.ppl_base.error);
  std::printf("Mean ln(PPL(Q)/PPL(base))  : %10.6f ± %10.6f\n", s.ln_ppl_ratio.value, s.ln_ppl_ratio.error);
  std::printf("Mean    KLD: %10.6f ± %10.6f\n", s.kld.value, s.kld.error);
  std::printf("Maximum KLD: %10.6f\n99.0%%   KLD: %10.6f\n95.0%%   KLD: %10.6f\n90.0%%   KLD: %10.6f\n", s.kld_max,
              s.kld_p99, s.kld_p95, s.kld_p90);
  std::printf("Median  KLD: %10.6f\n", s.kld_median);
  std::printf("Mean    Δp: %6.3f ± %5.3f %%\n", 100.0 * s.p_diff.value, 100.0 * s.p_diff.error);
  std::printf("RMS Δp    : %6.3f ± %5.3f %%\n", 100.0 * s.p_diff_rms.value, 100.0 * s.p_diff_rms.error);
  std::printf("Same top p: %6.3f ± %5.3f %%\n", 100.0 * s.same_top.value, 100.0 * s.same_top.error);
}

}  // namespace

int RunKldEval(const EvalArgs& args) {
  if (args.reference.empty()) return EvalFailure(absl::InvalidArgumentError("--kld needs --reference FLOAT_MODEL"));
  auto options = EvalStreamerOptions(args);
  if (!options.ok()) return EvalFailure(options.status());
  // Each model is open only for its own pass (the float model closed before the model opens), so that their
  // mapped embeddings and vocabulary projections are never resident together; --model is opened once first so
  // that a bad path fails before the reference pass.
  int64_t model_vocab = 0;
  if (auto model = OpenEvalModel(args.model, *options); !model.ok()) {
    return EvalFailure(absl::InvalidArgumentError("--model: " + std::string(model.status().message())));
  } else {
    model_vocab = model->streamer->config().vocab_size;
  }
  eval::KldOptions kld;
  kld.n_ctx = args.seq_len;
  kld.max_chunks = args.max_windows;
  absl::StatusOr<eval::KldReference> rows;
  {
    auto reference = OpenEvalModel(args.reference, *options);
    if (!reference.ok()) {
      return EvalFailure(absl::InvalidArgumentError("--reference: " + std::string(reference.status().message())));
    }
    if (const int64_t vocab = reference->streamer->config().vocab_size; vocab != model_vocab) {
      return EvalFailure(absl::InvalidArgumentError(
          absl::StrCat("--reference: vocabulary of ", vocab, " tokens, the model's is ", model_vocab)));
    }
    // The reference's tokenization, as llama-perplexity --kl-divergence-base stores it with the base log-probs.
    auto ids = EvalInputIds(args.text, args.token_ids, *reference);
    if (!ids.ok()) return EvalFailure(ids.status());
    kld.reference_hooks = reference->hooks;
    rows = eval::WriteKldReference(*reference->streamer, *ids, kld);
    if (!rows.ok()) return EvalFailure(rows.status());
  }
  auto model = OpenEvalModel(args.model, *options);
  if (!model.ok()) return EvalFailure(absl::InvalidArgumentError("--model: " + std::string(model.status().message())));
  kld.model_hooks = model->hooks;
  auto result = eval::ScoreKld(*model->streamer, *rows, kld);
  if (!result.ok()) return EvalFailure(result.status());
  if (args.json) {
    std::cout << eval::KldJson(*result).dump() << "\n";
  } else {
    PrintTable(*result);
  }
  return kExitOk;
}

}  // namespace quark::cli
