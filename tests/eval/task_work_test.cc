// CountTaskWork (core/eval/task_work.h) against the scorer itself: the requests, distinct inputs, tokens, attended
// pairs, scored positions and passes it counts equal what ScoreTask runs (seen through its LayerHooks and its
// result), and the estimator's fixture statistics (core/estimate/task_fixture_stats.inc) are its counts.
#include "core/eval/task_work.h"

#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "core/eval/fewshot.h"
#include "core/eval/opened_model.h"
#include "core/eval/task_scoring.h"
#include "tests/runtime/test_paths.h"

namespace quark::eval {
namespace {

std::string Fixtures() { return runtime::testing::SharedDir() + "/fixtures"; }

// What ScoreTask did: the first layer's inputs of every pass, and the result's requests and continuations.
estimate::TaskWork ObservedWork(const TaskInfo& task, const std::vector<TaskDoc>& docs, OpenedModel& model,
                                const runtime::Tokenizer& tokenizer, const TaskScoreOptions& base) {
  estimate::TaskWork seen;
  TaskScoreOptions options = base;
  options.hooks.before = [&seen](int64_t layer, runtime::DecoderLayer&, const std::vector<at::Tensor>& inputs) {
    if (layer != 0) return absl::OkStatus();
    ++seen.passes;
    for (const at::Tensor& hidden : inputs) {
      ++seen.samples;
      seen.input_tokens += hidden.size(1);
      seen.attended_pairs += hidden.size(1) * hidden.size(1);
    }
    return absl::OkStatus();
  };
  auto result = ScoreTask(task, docs, *model.streamer, tokenizer, options);
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return seen;
  for (const ExampleScore& e : result->examples) {
    for (const RequestScore& r : e.requests) {
      ++seen.requests;
      seen.scored_positions += static_cast<int64_t>(r.continuation_tokens.size());
    }
  }
  return seen;
}

std::string Describe(const estimate::TaskWork& w) {
  return absl::StrFormat("requests %d samples %d tokens %d pairs %d positions %d passes %d", w.requests, w.samples,
                         w.input_tokens, w.attended_pairs, w.scored_positions, w.passes);
}

TEST(TaskWorkTest, CountsAreWhatTheScorerRuns) {
  runtime::testing::InitTestEngine();
  auto model = OpenModel(Fixtures() + "/tinyllama-a");
  ASSERT_TRUE(model.ok()) << model.status();
  auto tokenizer = OpenModelTokenizer(*model);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const int64_t hidden_bytes = model->streamer->config().hidden_size *
                               static_cast<int64_t>(c10::elementSize(model->streamer->model().compute_dtype()));
  TaskScoreOptions score;
  score.max_length = 160;                              // some mmlu and arc prompts lose their left end
  score.activation_bytes_per_pass = 200 * hidden_bytes;  // a few requests per pass
  TaskWorkOptions count;
  count.max_length = score.max_length;
  count.activation_bytes_per_pass = score.activation_bytes_per_pass;
  count.hidden_bytes_per_token = hidden_bytes;
  for (const auto& [name, limit] : std::vector<std::pair<std::string, int64_t>>{
           {"arc_easy", 4}, {"piqa", 3}, {"winogrande", 3}, {"lambada_openai", 3}, {"mmlu", 1}}) {
    auto task = FindTask(name);
    ASSERT_TRUE(task.ok());
    auto docs = LoadTaskDocs(name, Fixtures() + "/tasks", limit);
    ASSERT_TRUE(docs.ok()) << docs.status();
    auto counted = CountTaskWork(*docs, **tokenizer, count);
    ASSERT_TRUE(counted.ok()) << counted.status();
    const estimate::TaskWork seen = ObservedWork(*task, *docs, *model, **tokenizer, score);
    EXPECT_EQ(*counted, seen) << name << "\ncounted:  " << Describe(*counted) << "\nobserved: " << Describe(seen);
    EXPECT_GT(seen.passes, 1) << name << ": the budget splits the requests into passes";
    // mmlu's answers share their input where " A".." D" begin with the same token (here, half of them do).
    if (name == "mmlu") EXPECT_LT(seen.samples, seen.requests);
  }
}

TEST(TaskWorkTest, TheEstimatorsFixtureStatisticsAreTheCounts) {
  runtime::testing::InitTestEngine();
  auto tokenizer = runtime::Tokenizer::Open(Fixtures() + "/tokenizers/llama2-32k.model", 1, 2);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  TaskWorkOptions count;  // a Llama-2-7B shape: 4096 positions, 4096 float32 hidden values a token
  count.max_length = 4096;
  count.hidden_bytes_per_token = 4096 * 4;
  for (const std::string name : {"piqa", "winogrande"}) {
    auto docs = LoadTaskDocs(name, Fixtures() + "/tasks", 0);
    ASSERT_TRUE(docs.ok()) << docs.status();
    auto counted = CountTaskWork(*docs, **tokenizer, count);
    ASSERT_TRUE(counted.ok()) << counted.status();
    const estimate::TaskWork estimated = estimate::EstimatedTaskWork({name}, 0, 4096);
    EXPECT_EQ(estimated.requests, counted->requests) << name;
    EXPECT_EQ(estimated.samples, counted->samples) << name;
    // Per-example means kept to 4-5 significant digits.
    EXPECT_NEAR(estimated.input_tokens, counted->input_tokens, 1e-4 * counted->input_tokens) << name;
    EXPECT_NEAR(estimated.scored_positions, counted->scored_positions, 1e-4 * counted->scored_positions) << name;
    EXPECT_NEAR(estimated.attended_pairs, counted->attended_pairs, 1e-4 * counted->attended_pairs) << name;
    EXPECT_NEAR(estimated.passes, counted->passes, 1) << name << ": tokens over the budget vs packed passes";
  }
}

// The estimator's few-shot defaults are the tasks' own, and its few-shot and generation figures follow what the
// scorer and the generator read: k-shot piqa counted by CountTaskWork on the real k-shot docs, gsm8k's 5-shot prompts
// tokenized as the generator encodes them.
TEST(TaskWorkTest, TheEstimatorsFewshotAndGenerationFiguresFollowTheDocs) {
  runtime::testing::InitTestEngine();
  for (const TaskInfo& task : KnownTasks()) {
    EXPECT_EQ(estimate::DefaultFewshot(task.name), task.default_fewshot) << task.name;
  }
  auto tokenizer = runtime::Tokenizer::Open(Fixtures() + "/tokenizers/llama2-32k.model", 1, 2);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  TaskWorkOptions count;
  count.max_length = 4096;
  count.hidden_bytes_per_token = 4096 * 4;
  auto piqa = FindTask("piqa");
  ASSERT_TRUE(piqa.ok());
  int64_t shots = 5;
  auto docs = LoadFewshotTaskDocs(*piqa, Fixtures() + "/tasks", 0, shots);
  ASSERT_TRUE(docs.ok()) << docs.status();
  auto counted = CountTaskWork(*docs, **tokenizer, count);
  ASSERT_TRUE(counted.ok()) << counted.status();
  const estimate::TaskWork estimated = estimate::EstimatedTaskWork({"piqa"}, 0, 4096, shots, 4096);
  EXPECT_EQ(estimated.requests, counted->requests);
  // The estimate lengthens each input by k mean examples; the docs draw particular ones.
  EXPECT_NEAR(estimated.input_tokens, counted->input_tokens, 0.05 * counted->input_tokens) << Describe(*counted);
  EXPECT_NEAR(estimated.attended_pairs, counted->attended_pairs, 0.15 * counted->attended_pairs) << Describe(*counted);
  EXPECT_GT(estimated.input_tokens, 5 * estimate::EstimatedTaskWork({"piqa"}, 0, 4096).input_tokens);

  auto gsm8k = FindTask("gsm8k");
  ASSERT_TRUE(gsm8k.ok());
  shots = -1;  // the task's default: 5
  auto problems = LoadFewshotTaskDocs(*gsm8k, Fixtures() + "/tasks", 200, shots);
  ASSERT_TRUE(problems.ok()) << problems.status();
  ASSERT_EQ(shots, 5);
  double prompt_tokens = 0;
  for (const TaskDoc& doc : *problems) {
    auto ids = (*tokenizer)->EncodeWithBos(doc.requests.at(0).context);
    ASSERT_TRUE(ids.ok()) << ids.status();
    prompt_tokens += static_cast<double>(ids->size());
  }
  const estimate::TaskWork generation = estimate::EstimatedTaskWork({"gsm8k"}, 200, 4096, std::nullopt, 4096);
  EXPECT_EQ(generation.requests, 200);
  EXPECT_EQ(generation.generated_tokens, 200 * 256);
  EXPECT_NEAR(static_cast<double>(generation.input_tokens), prompt_tokens, 0.05 * prompt_tokens);
}

}  // namespace
}  // namespace quark::eval
