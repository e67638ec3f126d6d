// The estimator's #31 phases: tasks on the float model and each export read back, KLD per export.
#include <gtest/gtest.h>

#include "core/config/presets.h"
#include "core/estimate/job_estimate.h"
#include "core/estimate/model_shape.h"
#include "core/estimate/task_cost.h"
#include "tests/estimate/find_phase.h"

namespace quark::estimate {
namespace {

using testing::Find;

TEST(EvalEstimateTest, TasksAndKldAddPhasesThatGrowWithTheirWork) {
  absl::StatusOr<ModelShape> model = ReadModelShape(QUARK_TEST_SOURCE_DIR "/../shared/fixtures/tinyllama-a");
  ASSERT_TRUE(model.ok()) << model.status();
  // The fixtures' statistics per example (task_fixture_stats.inc; TaskWorkTest holds them to the counts).
  const TaskWork arc = EstimatedTaskWork({"arc_easy"}, 100, 4096);
  EXPECT_EQ(arc.requests, 400);  // 3.9987 a question: a few have 3 or 5 choices
  EXPECT_EQ(arc.input_tokens, 13493);
  EXPECT_EQ(arc.passes, 1);
  const TaskWork mmlu = EstimatedTaskWork({"mmlu"}, 1, 4096);  // --limit per subject: 57 questions
  EXPECT_EQ(mmlu.requests, 57 * 4);
  EXPECT_EQ(mmlu.samples, 57);  // the four answers share their input
  EXPECT_EQ(EstimatedTaskWork({"mmlu"}, 0, 4096).passes, 121);  // 1,968,759 tokens, 16,384 to a pass
  TaskWork both = EstimatedTaskWork({"arc_easy"}, 1, 4096);
  both += mmlu;
  EXPECT_EQ(EstimatedTaskWork({"arc_easy", "mmlu", "hellaswag"}, 1, 4096), both) << "unknown names count nothing";
  // Few-shot: mmlu's default is 5 shots; inputs grow about sixfold, capped by the model's context.
  const TaskWork mmlu5 = EstimatedTaskWork({"mmlu"}, 1, 4096, std::nullopt, 4096);
  EXPECT_EQ(mmlu5.requests, mmlu.requests);
  EXPECT_NEAR(mmlu5.input_tokens, 6 * mmlu.input_tokens, 2);
  EXPECT_LE(EstimatedTaskWork({"mmlu"}, 1, 4096, 5, 256).input_tokens, 57 * 256);
  // gsm8k generates up to 256 tokens a problem after a 5-shot prompt cut to max_length - 256; one pass.
  const TaskWork gsm8k = EstimatedTaskWork({"gsm8k"}, 10, 4096, std::nullopt, 512);
  EXPECT_EQ(gsm8k.generated_tokens, 2560);
  EXPECT_EQ(gsm8k.input_tokens, 2560);
  EXPECT_EQ(gsm8k.passes, 1);
  EXPECT_EQ(GenerationCacheTokens({"gsm8k"}, std::nullopt, 512), 512);
  EXPECT_EQ(GenerationCacheTokens({"arc_easy"}, std::nullopt, 512), 0);

  JobInputs job;
  job.config = *PresetConfig("uint4_wo_128");
  job.evaluation_tokens = 4096;
  job.evaluation_seq_len = 512;
  absl::StatusOr<JobEstimate> plain = EstimateJob(*model, job, ReferenceThroughput());
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(Find(*plain, "evaluate_tasks"), nullptr);
  EXPECT_EQ(Find(*plain, "evaluate_kld"), nullptr);

  job.tasks = {"arc_easy", "piqa"};
  job.task_limit = 20;
  job.task_models = 1;
  job.kld_exports = 1;
  absl::StatusOr<JobEstimate> one = EstimateJob(*model, job, ReferenceThroughput());
  job.task_models = 2;  // float + one export read back
  job.kld_exports = 2;
  absl::StatusOr<JobEstimate> two = EstimateJob(*model, job, ReferenceThroughput());
  ASSERT_TRUE(one.ok() && two.ok());
  const PhaseEstimate* tasks1 = Find(*one, "evaluate_tasks");
  const PhaseEstimate* tasks2 = Find(*two, "evaluate_tasks");
  ASSERT_TRUE(tasks1 && tasks2);
  EXPECT_DOUBLE_EQ(tasks1->seconds,
                   TaskSeconds(*model, EstimatedTaskWork(job.tasks, 20, 256), ReferenceThroughput()));
  EXPECT_NEAR(tasks2->seconds, 2 * tasks1->seconds, 1e-9 * tasks1->seconds);
  // KLD: the float model and the export over the text, per export: twice the perplexity pass's run each.
  const PhaseEstimate* evaluate = Find(*one, "evaluate");
  ASSERT_TRUE(evaluate && Find(*one, "evaluate_kld") && Find(*two, "evaluate_kld"));
  EXPECT_NEAR(Find(*one, "evaluate_kld")->seconds, evaluate->seconds, 1e-9 * evaluate->seconds);  // 2 runs vs 2 runs
  EXPECT_NEAR(Find(*two, "evaluate_kld")->seconds, 2 * evaluate->seconds, 1e-9 * evaluate->seconds);
  EXPECT_GT(one->total_seconds, plain->total_seconds);

  // gsm8k holds the whole decoder in float32 with its KV cache, and its decode steps cost time of their own.
  job.tasks = {"gsm8k"};
  job.task_limit = 10;
  job.task_models = 1;
  absl::StatusOr<JobEstimate> generation = EstimateJob(*model, job, ReferenceThroughput());
  ASSERT_TRUE(generation.ok()) << generation.status();
  const PhaseEstimate* generate = Find(*generation, "evaluate_tasks");
  ASSERT_NE(generate, nullptr);
  EXPECT_GE(generate->peak_host_bytes, 4ull * model->layer_params_total);
  const TaskWork problems = EstimatedTaskWork(job.tasks, 10, model->config.hidden_size, std::nullopt,
                                              model->config.max_position_embeddings);
  TaskWork prompts_only = problems;
  prompts_only.generated_tokens = 0;
  EXPECT_DOUBLE_EQ(generate->seconds, TaskSeconds(*model, problems, ReferenceThroughput()));
  EXPECT_GT(generate->seconds, TaskSeconds(*model, prompts_only, ReferenceThroughput()));
}

}  // namespace
}  // namespace quark::estimate
