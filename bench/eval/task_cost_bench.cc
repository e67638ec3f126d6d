// The task scorer's seconds beside the work core/eval's CountTaskWork counts, one JSON line per task, for
// bench/eval/fit_task_cost.py; with --count-only, the counts alone (no model run: only the tokenizer).
//
// Run it with QUARK_THREADS=1: the fit is of one thread's CPU seconds (the reference throughputs' threads).
//
//   task_cost_bench --model DIR --tasks-dir DIR --tasks arc_easy,piqa [--limit N] [--count-only]
//                   [--tokenizer FILE]   (with --count-only: count with this tokenizer instead of the model's)
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/base/openmp_wait_policy.h"
#include "core/engine/engine_init.h"
#include "core/estimate/model_shape.h"
#include "core/estimate/task_cost.h"
#include "core/eval/opened_model.h"
#include "core/eval/task_scoring.h"
#include "core/eval/task_work.h"

namespace {

struct Args {
  std::string model, tasks_dir, tasks, tokenizer;
  int64_t limit = 10;
  bool count_only = false;
};

std::vector<std::string> Split(const std::string& list) {
  std::vector<std::string> out;
  for (size_t start = 0; start <= list.size();) {
    const size_t comma = std::min(list.find(',', start), list.size());
    if (comma > start) out.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

// User + system CPU seconds of the process so far: on a shared machine the fit uses these, wall time waits.
double CpuSeconds() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec + 1e-6 * (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "task_cost_bench: %s\n", what.c_str());
  return 1;
}

nlohmann::json WorkJson(const quark::estimate::TaskWork& w) {
  return {{"requests", w.requests},         {"samples", w.samples},
          {"input_tokens", w.input_tokens}, {"scored_positions", w.scored_positions},
          {"attended_pairs", w.attended_pairs}, {"passes", w.passes}};
}

}  // namespace

int main(int argc, char** argv) {
  quark::EnsurePassiveOpenMpWaits();  // OpenMP's idle threads sleep, as in quark and quark-worker
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (flag == "--model") a.model = next();
    else if (flag == "--tasks-dir") a.tasks_dir = next();
    else if (flag == "--tasks") a.tasks = next();
    else if (flag == "--limit") a.limit = std::stoll(next());
    else if (flag == "--tokenizer") a.tokenizer = next();
    else if (flag == "--count-only") a.count_only = true;
    else return Fail("unknown flag " + flag);
  }
  if (a.model.empty() || a.tasks_dir.empty() || a.tasks.empty()) return Fail("--model, --tasks-dir and --tasks are required");
  quark::InitEngine();
  auto opened = quark::eval::OpenModel(a.model);
  if (!opened.ok()) return Fail(std::string(opened.status().message()));
  auto shape = quark::estimate::ReadModelShape(a.model);
  if (!shape.ok()) return Fail(std::string(shape.status().message()));
  auto tokenizer = a.tokenizer.empty() ? quark::eval::OpenModelTokenizer(*opened)
                                       : quark::runtime::Tokenizer::Open(a.tokenizer);
  if (!tokenizer.ok()) return Fail(std::string(tokenizer.status().message()));
  const auto& config = opened->streamer->config();
  quark::eval::TaskWorkOptions count;
  count.max_length = config.max_position_embeddings > 0 ? config.max_position_embeddings : 2048;
  count.hidden_bytes_per_token =
      config.hidden_size * static_cast<int64_t>(c10::elementSize(opened->streamer->model().compute_dtype()));
  for (const std::string& name : Split(a.tasks)) {
    auto task = quark::eval::FindTask(name);
    if (!task.ok()) return Fail(std::string(task.status().message()));
    auto docs = quark::eval::LoadTaskDocs(name, a.tasks_dir, a.limit);
    if (!docs.ok()) return Fail(std::string(docs.status().message()));
    auto work = quark::eval::CountTaskWork(*docs, **tokenizer, count);
    if (!work.ok()) return Fail(std::string(work.status().message()));
    nlohmann::json line = {{"model", a.model},         {"task", name},
                           {"limit", a.limit},         {"examples", docs->size()},
                           {"layers", shape->num_layers}, {"hidden", config.hidden_size},
                           {"vocab", config.vocab_size}, {"weight_bytes", shape->weight_bytes},
                           {"layer_params", shape->layer_params_total}, {"work", WorkJson(*work)}};
    if (!a.count_only) {
      quark::eval::TaskScoreOptions options;
      options.hooks = opened->hooks;
      const auto start = std::chrono::steady_clock::now();
      const double cpu_start = CpuSeconds();
      auto result = quark::eval::ScoreTask(*task, *docs, *opened->streamer, **tokenizer, options);
      if (!result.ok()) return Fail(std::string(result.status().message()));
      line["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      line["cpu_seconds"] = CpuSeconds() - cpu_start;
      line["threads"] = quark::EngineThreads();
      // The terms priced by the worker's rates: the weights read per pass (subtracted by the fit) and the
      // decoder's FLOPs (scaled by the fit's gemm_scale), at the reference throughputs.
      const quark::estimate::Throughput rates = quark::estimate::ReferenceThroughput();
      line["read_seconds"] = static_cast<double>(work->passes) * shape->weight_bytes / rates.disk_read_bytes_per_s;
      line["gemm_seconds"] = quark::estimate::TaskFlops(*shape, *work) / rates.gemm_flops;
      line["model_seconds"] =
          quark::estimate::TaskSeconds(*shape, *work, quark::estimate::ReferenceThroughput());
    }
    std::printf("%s\n", line.dump().c_str());
    std::fflush(stdout);
  }
  return 0;
}
