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

// Generation tasks (core/eval/generation_task.h), per example from `quark tokenize` with llama2-32k.model over the
// whole fixture file: the zero-shot prompt ("Question: {question}\nAnswer:") and a rendered few-shot example
// ("Question: {question}\nAnswer: {answer}" + "\n\n"), in tokens; gsm8k.h's max_gen_toks.
struct GenerationStats {
  const char* name;
  int64_t examples;
  double prompt_tokens;
  double example_tokens;
  int64_t max_gen_toks;
};
constexpr GenerationStats kGenerationStats[] = {{"gsm8k", 1319, 74.43, 206.25, 256}};

// lm-eval's num_fewshot defaults (core/eval/task_docs.cc's TaskInfo::default_fewshot).
struct FewshotDefault {
  const char* name;
  int64_t shots;
};
constexpr FewshotDefault kFewshotDefaults[] = {{"mmlu", 5}, {"gsm8k", 5}};

int64_t Shots(const std::string& name, std::optional<int64_t> num_fewshot) {
  return num_fewshot ? std::max<int64_t>(0, *num_fewshot) : DefaultFewshot(name);
}

// The k-shot prompt of a generation task, cut as greedy_generation.h cuts it.
double GenerationPrompt(const GenerationStats& g, int64_t shots, int64_t max_length) {
  double prompt = g.prompt_tokens + static_cast<double>(shots) * g.example_tokens;
  if (max_length > g.max_gen_toks) prompt = std::min(prompt, static_cast<double>(max_length - g.max_gen_toks));
  return prompt;
}

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
  generated_tokens += o.generated_tokens;
  return *this;
}

bool TaskWork::operator==(const TaskWork& o) const {
  return requests == o.requests && samples == o.samples && input_tokens == o.input_tokens &&
         scored_positions == o.scored_positions && attended_pairs == o.attended_pairs && passes == o.passes &&
         generated_tokens == o.generated_tokens;
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
         fit.head_weight_s * work.requests * mc.hidden_size * vocab + fit.logit_s * work.scored_positions * vocab +
         static_cast<double>(work.generated_tokens) *
             (fit.decode_weight_s * (static_cast<double>(model.layer_params_total) + mc.hidden_size * vocab) +
              fit.logit_s * vocab);
}

int64_t DefaultFewshot(const std::string& name) {
  for (const FewshotDefault& d : kFewshotDefaults) {
    if (name == d.name) return d.shots;
  }
  return 0;
}

int64_t GenerationCacheTokens(const std::vector<std::string>& names, std::optional<int64_t> num_fewshot,
                              int64_t max_length) {
  double longest = 0;
  for (const std::string& name : names) {
    for (const GenerationStats& g : kGenerationStats) {
      if (name == g.name) longest = std::max(longest, GenerationPrompt(g, Shots(name, num_fewshot), max_length) + g.max_gen_toks);
    }
  }
  return std::llround(longest);
}

TaskWork EstimatedTaskWork(const std::vector<std::string>& names, int64_t limit, int64_t hidden_size,
                           std::optional<int64_t> num_fewshot, int64_t max_length) {
  TaskWork total;
  for (const std::string& name : names) {
    const int64_t shots = Shots(name, num_fewshot);
    for (const TaskStats& t : kFixtureStats) {
      if (name != t.name) continue;
      const double n = static_cast<double>(limit > 0 ? std::min(t.examples, limit * t.subjects) : t.examples);
      // A sample's input is about one rendered example (S tokens); k shots put k S more before each input T:
      // sum (T + kS)^2 = sum T^2 + 2kS sum T + samples (kS)^2; the mean input is cut at max_length.
      const double samples = n * t.samples, tokens = n * t.input_tokens, pairs = n * t.attended_pairs;
      const double prefix = static_cast<double>(shots) * t.input_tokens / t.samples;
      double grown_tokens = tokens + samples * prefix;
      double grown_pairs = pairs + 2 * prefix * tokens + samples * prefix * prefix;
      if (max_length > 0 && grown_tokens > samples * static_cast<double>(max_length)) {
        grown_tokens = samples * static_cast<double>(max_length);
        grown_pairs = samples * static_cast<double>(max_length) * static_cast<double>(max_length);
      }
      TaskWork w;
      w.requests = std::llround(n * t.requests);
      w.samples = std::llround(samples);
      w.input_tokens = std::llround(grown_tokens);
      w.scored_positions = std::llround(n * t.scored_positions);
      w.attended_pairs = std::llround(grown_pairs);
      w.passes = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(w.input_tokens * 4.0 * hidden_size / kPassBudgetBytes)));
      total += w;
    }
    for (const GenerationStats& g : kGenerationStats) {
      if (name != g.name) continue;
      const double n = static_cast<double>(limit > 0 ? std::min(g.examples, limit) : g.examples);
      const double prompt = GenerationPrompt(g, shots, max_length);
      const double steps = static_cast<double>(g.max_gen_toks);
      TaskWork w;
      w.requests = std::llround(n);
      w.samples = std::llround(n);  // the prefill: one [1, prompt] forward
      w.input_tokens = std::llround(n * prompt);
      // The prefill's square, then each decode step attends the prompt and the tokens before it.
      w.attended_pairs = std::llround(n * (prompt * prompt + steps * prompt + steps * (steps - 1) / 2));
      w.generated_tokens = std::llround(n * steps);
      w.passes = 1;  // the whole model is read once and held
      total += w;
    }
  }
  return total;
}

}  // namespace quark::estimate
