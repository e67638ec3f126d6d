#include "core/cli/eval_kld.h"

#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "core/cli/command_registry.h"
#include "core/eval/kld_eval.h"

namespace quark::cli {
namespace {

nlohmann::json ToJson(const eval::MeanAndError& m) { return {{"value", m.value}, {"stderr", m.error}}; }

nlohmann::json ToJson(const eval::KldResult& r) {
  const eval::KldSummary& s = r.summary;
  return {{"n_ctx", r.n_ctx},
          {"chunks", r.chunks},
          {"input_tokens", r.input_tokens},
          {"tokens_scored", s.tokens},
          {"scratch_bytes", r.scratch_bytes},
          {"reference_seconds", r.reference_seconds},
          {"model_seconds", r.model_seconds},
          {"ppl", ToJson(s.ppl)},
          {"ppl_base", ToJson(s.ppl_base)},
          {"ln_ppl_ratio", ToJson(s.ln_ppl_ratio)},
          {"kld_mean", ToJson(s.kld)},
          {"kld_median", s.kld_median},
          {"kld_p90", s.kld_p90},
          {"kld_p95", s.kld_p95},
          {"kld_p99", s.kld_p99},
          {"kld_p99_9", s.kld_p999},
          {"kld_max", s.kld_max},
          {"kld_min", s.kld_min},
          {"same_top", ToJson(s.same_top)},
          {"delta_p_mean", ToJson(s.p_diff)},
          {"delta_p_median", s.p_diff_median},
          {"delta_p_max", s.p_diff_max},
          {"delta_p_min", s.p_diff_min},
          {"delta_p_rms", ToJson(s.p_diff_rms)}};
}

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
  auto model = OpenEvalModel(args.model, *options);
  if (!model.ok()) return EvalFailure(absl::InvalidArgumentError("--model: " + std::string(model.status().message())));
  auto reference = OpenEvalModel(args.reference, *options);
  if (!reference.ok()) {
    return EvalFailure(absl::InvalidArgumentError("--reference: " + std::string(reference.status().message())));
  }
  // The reference's tokenization, as llama-perplexity --kl-divergence-base stores it with the base log-probs.
  auto ids = EvalInputIds(args.text, args.token_ids, *reference);
  if (!ids.ok()) return EvalFailure(ids.status());
  eval::KldOptions kld;
  kld.n_ctx = args.seq_len;
  kld.max_chunks = args.max_windows;
  kld.reference_hooks = reference->hooks;
  kld.model_hooks = model->hooks;
  auto result = eval::EvaluateKld(*reference->streamer, *model->streamer, *ids, kld);
  if (!result.ok()) return EvalFailure(result.status());
  if (args.json) {
    std::cout << ToJson(*result).dump() << "\n";
  } else {
    PrintTable(*result);
  }
  return kExitOk;
}

}  // namespace quark::cli
