#include "core/eval/eval_json.h"

#include <algorithm>
#include <cmath>

namespace quark::eval {

nlohmann::json MeanJson(const MeanAndError& m) { return {{"value", m.value}, {"stderr", m.error}}; }

nlohmann::json KldJson(const KldResult& r) {
  const KldSummary& s = r.summary;
  return {{"n_ctx", r.n_ctx},
          {"chunks", r.chunks},
          {"input_tokens", r.input_tokens},
          {"tokens_scored", s.tokens},
          {"scratch_bytes", r.scratch_bytes},
          {"reference_seconds", r.reference_seconds},
          {"model_seconds", r.model_seconds},
          {"ppl", MeanJson(s.ppl)},
          {"ppl_base", MeanJson(s.ppl_base)},
          {"ln_ppl_ratio", MeanJson(s.ln_ppl_ratio)},
          {"kld_mean", MeanJson(s.kld)},
          {"kld_median", s.kld_median},
          {"kld_p90", s.kld_p90},
          {"kld_p95", s.kld_p95},
          {"kld_p99", s.kld_p99},
          {"kld_p99_9", s.kld_p999},
          {"kld_max", s.kld_max},
          {"kld_min", s.kld_min},
          {"same_top", MeanJson(s.same_top)},
          {"delta_p_mean", MeanJson(s.p_diff)},
          {"delta_p_median", s.p_diff_median},
          {"delta_p_max", s.p_diff_max},
          {"delta_p_min", s.p_diff_min},
          {"delta_p_rms", MeanJson(s.p_diff_rms)}};
}

nlohmann::json DeltaPHistogramJson(const std::vector<float>& p_diff_values, int bins) {
  std::vector<int64_t> counts(static_cast<size_t>(std::max(bins, 1)), 0);
  for (float v : p_diff_values) {
    // Δp lies in [-1, 1]; 1 itself goes to the last bin.
    const double position = (static_cast<double>(v) + 1.0) / 2.0 * static_cast<double>(counts.size());
    const auto bin = static_cast<int64_t>(std::floor(position));
    counts[static_cast<size_t>(std::clamp<int64_t>(bin, 0, static_cast<int64_t>(counts.size()) - 1))] += 1;
  }
  return {{"lo", -1.0}, {"hi", 1.0}, {"counts", counts}};
}

nlohmann::json TaskMetricsJson(const TaskResult& r) {
  nlohmann::json metrics = nlohmann::json::object();
  for (const auto& [name, m] : r.metrics) {
    metrics[name] = {{"value", m.value}, {"stderr", m.has_stderr ? nlohmann::json(m.stderr_value) : nlohmann::json()}};
  }
  return metrics;
}

nlohmann::json TaskResultJson(const TaskResult& r, const std::vector<TaskDoc>& docs, bool log_samples) {
  nlohmann::json samples = nlohmann::json::array();
  for (size_t d = 0; d < r.examples.size(); ++d) {
    const ExampleScore& e = r.examples[d];
    nlohmann::json lls = nlohmann::json::array(), greedy = nlohmann::json::array();
    for (const auto& q : e.requests) {
      lls.push_back(q.loglikelihood);
      greedy.push_back(q.is_greedy);
    }
    nlohmann::json s = {{"id", e.id}, {"gold", e.gold}, {"loglikelihoods", lls}, {"is_greedy", greedy}};
    if (!e.filtered.empty()) {  // a generation task: what was generated and what each filter took from it
      s = {{"id", e.id},
           {"target", docs[d].requests[0].continuation},
           {"generation", e.generation},
           {"generated_tokens", e.generated_tokens.size()},
           {"filtered", e.filtered}};
      if (log_samples) {
        s["context"] = docs[d].requests[0].context;
        s["tokens"] = e.generated_tokens;
      }
    }
    if (docs[d].requests.size() > 1) {
      s["pred"] = e.pred;
      s["pred_norm"] = e.pred_norm;
    }
    if (log_samples) {
      nlohmann::json requests = nlohmann::json::array();
      for (size_t q = 0; q < e.requests.size(); ++q) {
        requests.push_back({{"context", docs[d].requests[q].context},
                            {"continuation", docs[d].requests[q].continuation},
                            {"tokens", e.requests[q].continuation_tokens},
                            {"token_logprobs", e.requests[q].token_logprobs},
                            {"truncated", e.requests[q].truncated}});
      }
      s["requests"] = requests;
    }
    samples.push_back(s);
  }
  return {{"task", r.task},
          {"num_fewshot", r.num_fewshot},
          {"examples", r.examples.size()},
          {"metrics", TaskMetricsJson(r)},
          {"seconds", r.seconds},
          {"truncated_requests", r.truncated},
          {"max_length", r.max_length},
          {"generated_tokens", r.generated_tokens},
          {"samples", samples}};
}

}  // namespace quark::eval
