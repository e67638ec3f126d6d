// The estimator's #31 phases: tasks on the float model and each export read back, KLD per export.
#include <gtest/gtest.h>

#include "core/config/presets.h"
#include "core/estimate/job_estimate.h"
#include "core/estimate/model_shape.h"
#include "core/eval/evaluation_plan.h"

namespace quark::estimate {
namespace {

const PhaseEstimate* Find(const JobEstimate& e, const std::string& phase) {
  for (const PhaseEstimate& p : e.phases) {
    if (p.phase == phase) return &p;
  }
  return nullptr;
}

TEST(EvalEstimateTest, TasksAndKldAddPhasesThatGrowWithTheirWork) {
  absl::StatusOr<ModelShape> model = ReadModelShape(QUARK_TEST_SOURCE_DIR "/../shared/fixtures/tinyllama-a");
  ASSERT_TRUE(model.ok()) << model.status();
  eval::EvaluationPlan plan;
  plan.tasks = {"arc_easy"};
  plan.task_limit = 100;
  EXPECT_EQ(eval::EstimatedTaskTokens(plan), 100 * 4 * 155 * 2 / 7);  // examples x choices x chars / 3.5
  plan.tasks = {"mmlu"};
  plan.task_limit = 1;  // per subject: 57 questions
  EXPECT_EQ(eval::EstimatedTaskTokens(plan), 57 * 4 * 548 * 2 / 7);

  JobInputs job;
  job.config = *PresetConfig("uint4_wo_128");
  job.evaluation_tokens = 4096;
  job.evaluation_seq_len = 512;
  absl::StatusOr<JobEstimate> plain = EstimateJob(*model, job, ReferenceThroughput());
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(Find(*plain, "evaluate_tasks"), nullptr);
  EXPECT_EQ(Find(*plain, "evaluate_kld"), nullptr);

  job.task_tokens = 20000;
  job.task_models = 2;
  job.task_streams = 2;
  job.kld_exports = 1;
  absl::StatusOr<JobEstimate> one = EstimateJob(*model, job, ReferenceThroughput());
  job.task_tokens = 40000;
  job.task_streams = 4;  // two tasks of the same total size each
  job.kld_exports = 2;
  absl::StatusOr<JobEstimate> two = EstimateJob(*model, job, ReferenceThroughput());
  ASSERT_TRUE(one.ok() && two.ok());
  const PhaseEstimate* tasks1 = Find(*one, "evaluate_tasks");
  const PhaseEstimate* tasks2 = Find(*two, "evaluate_tasks");
  ASSERT_TRUE(tasks1 && tasks2);
  EXPECT_GT(tasks1->seconds, 0);
  EXPECT_NEAR(tasks2->seconds, 2 * tasks1->seconds, 1e-9 * tasks1->seconds);
  // KLD: the float model and the export over the text, per export: twice the perplexity pass's run each.
  const PhaseEstimate* evaluate = Find(*one, "evaluate");
  ASSERT_TRUE(evaluate && Find(*one, "evaluate_kld") && Find(*two, "evaluate_kld"));
  EXPECT_NEAR(Find(*one, "evaluate_kld")->seconds, evaluate->seconds, 1e-9 * evaluate->seconds);  // 2 runs vs 2 runs
  EXPECT_NEAR(Find(*two, "evaluate_kld")->seconds, 2 * evaluate->seconds, 1e-9 * evaluate->seconds);
  EXPECT_GT(one->total_seconds, plain->total_seconds);
}

}  // namespace
}  // namespace quark::estimate
