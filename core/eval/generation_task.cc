#include "core/eval/generation_task.h"

#include <unistd.h>

#include <chrono>

#include "core/base/strings.h"
#include "core/eval/greedy_generation.h"
#include "core/eval/gsm8k.h"

namespace quark::eval {

int64_t PhysicalMemoryBytes() {
  return static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<int64_t>(sysconf(_SC_PAGE_SIZE));
}

absl::StatusOr<TaskResult> ScoreGenerationTask(const TaskInfo& task, const std::vector<TaskDoc>& docs,
                                               runtime::LayerStreamer& streamer, const runtime::Tokenizer& tokenizer,
                                               const TaskScoreOptions& options) {
  if (task.name != "gsm8k") return absl::UnimplementedError(StrCat("no generation scorer for task ", task.name));
  const auto start = std::chrono::steady_clock::now();
  TaskResult result;
  result.task = task.name;
  const int64_t max_pos = streamer.config().max_position_embeddings;
  result.max_length = options.max_length > 0 ? options.max_length : (max_pos > 0 ? max_pos : 2048);
  KvCacheOptions cache;
  cache.max_tokens = result.max_length;
  cache.memory_budget = options.memory_budget > 0 ? options.memory_budget : PhysicalMemoryBytes();
  auto decoder = KvCacheDecoder::Load(streamer, options.hooks, cache);
  if (!decoder.ok()) return decoder.status();
  std::vector<double> strict, flexible;
  for (const TaskDoc& doc : docs) {
    GenerationRequest request{doc.requests[0].context, Gsm8kStopSequences(), kGsm8kMaxGenToks};
    auto generation = GenerateUntil(**decoder, tokenizer, request, result.max_length);
    if (!generation.ok()) {
      return absl::Status(generation.status().code(), StrCat(doc.id, ": ", std::string(generation.status().message())));
    }
    ExampleScore e;
    e.id = doc.id;
    e.generation = generation->text;
    e.generated_tokens = generation->tokens;
    e.filtered["strict-match"] = Gsm8kStrictMatch(e.generation);
    e.filtered["flexible-extract"] = Gsm8kFlexibleExtract(e.generation);
    const std::string& reference = doc.requests[0].continuation;
    strict.push_back(Gsm8kExactMatch(e.filtered["strict-match"], reference) ? 1.0 : 0.0);
    flexible.push_back(Gsm8kExactMatch(e.filtered["flexible-extract"], reference) ? 1.0 : 0.0);
    result.truncated += generation->truncated;
    result.generated_tokens += static_cast<int64_t>(generation->tokens.size());
    result.examples.push_back(std::move(e));
  }
  result.metrics["exact_match_strict_match"] = MeanWithStderr(strict);
  result.metrics["exact_match_flexible_extract"] = MeanWithStderr(flexible);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace quark::eval
