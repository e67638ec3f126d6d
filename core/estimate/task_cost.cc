#include "core/estimate/task_cost.h"

#include <algorithm>
#include <cmath>

namespace quark::estimate {
namespace {

// Per task, from `task_cost_bench --count-only --tokenizer llama2-32k.model` over the whole fixture files
// (bench/eval/task_cost_fit.json, "fixtures"): the examples and the work per example. mmlu's --limit is per subject.
struct TaskStats {
  const char* name;
  int64_t examples;
  int64_t subjects;
  double requests;          // per example
  double samples;           // distinct inputs per example
  double input_tokens;      // per example
  double scored_positions;  // per example
  double attended_pairs;    // per example
};
constexpr TaskStats kFixtureStats[] = {
#include "core/estimate/task_fixture_stats.inc"
};

// The scorer's activation budget per pass (TaskScoreOptions::activation_bytes_per_pass) over float32 hidden states.
constexpr double kPassBudgetBytes = 256.0 * (1 << 20);

}  // namespace

TaskWork& TaskWork::operator+=(const TaskWork& o) {
  requests += o.requests;
  samples += o.samples;
  input_tokens += o.input_tokens;
  scored_positions += o.scored_positions;
  attended_pairs += o.attended_pairs;
  passes += o.passes;
  return *this;
}

bool TaskWork::operator==(const TaskWork& o) const {
  return requests == o.requests && samples == o.samples && input_tokens == o.input_tokens &&
         scored_positions == o.scored_positions && attended_pairs == o.attended_pairs && passes == o.passes;
}

double TaskFlops(const ModelShape& model, const TaskWork& work) {
  return 2.0 * model.layer_params_total * static_cast<double>(work.input_tokens) +
         4.0 * model.config.hidden_size * static_cast<double>(model.num_layers) * static_cast<double>(work.attended_pairs);
}

double TaskSeconds(const ModelShape& model, const TaskWork& work, const Throughput& rates,
                   const TaskCostCoefficients& fit) {
  const auto& mc = model.config;
  const double layers = static_cast<double>(model.num_layers);
  const double vocab = static_cast<double>(mc.vocab_size);
  return static_cast<double>(work.passes) * model.weight_bytes / rates.disk_read_bytes_per_s +
         fit.gemm_scale * TaskFlops(model, work) / rates.gemm_flops + fit.sample_layer_s * work.samples * layers + fit.request_s * work.requests +
         fit.head_weight_s * work.requests * mc.hidden_size * vocab + fit.logit_s * work.scored_positions * vocab;
}

TaskWork EstimatedTaskWork(const std::vector<std::string>& names, int64_t limit, int64_t hidden_size) {
  TaskWork total;
  for (const std::string& name : names) {
    for (const TaskStats& t : kFixtureStats) {
      if (name != t.name) continue;
      const double n = static_cast<double>(limit > 0 ? std::min(t.examples, limit * t.subjects) : t.examples);
      TaskWork w;
      w.requests = std::llround(n * t.requests);
      w.samples = std::llround(n * t.samples);
      w.input_tokens = std::llround(n * t.input_tokens);
      w.scored_positions = std::llround(n * t.scored_positions);
      w.attended_pairs = std::llround(n * t.attended_pairs);
      w.passes = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(w.input_tokens * 4.0 * hidden_size / kPassBudgetBytes)));
      total += w;
    }
  }
  return total;
}

}  // namespace quark::estimate
