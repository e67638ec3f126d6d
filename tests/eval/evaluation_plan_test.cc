// The evaluation plan of a job (tasks, KLD, gates): refused fields are named, gates judge the figures.
#include "core/eval/evaluation_plan.h"

#include <gtest/gtest.h>

namespace quark::eval {
namespace {

std::string Check(const EvaluationPlan& plan) {
  return std::string(ValidateEvaluationPlan(plan, "spec.evaluation").message());
}

TEST(EvaluationPlanTest, BadPlansNameTheField) {
  EvaluationPlan plan;
  plan.tasks = {"arc_easy", "hellaswag"};
  EXPECT_NE(Check(plan).find("spec.evaluation.tasks[1]: unknown task \"hellaswag\""), std::string::npos) << Check(plan);
  EXPECT_NE(Check(plan).find("arc_easy, arc_challenge, piqa"), std::string::npos) << Check(plan);
  plan.tasks = {"piqa", "piqa"};
  EXPECT_EQ(Check(plan), "spec.evaluation.tasks[1]: \"piqa\" is named twice");
  plan.tasks = {"piqa"};
  plan.task_limit = -1;
  EXPECT_EQ(Check(plan), "spec.evaluation.task_limit: -1 is negative");
  plan.task_limit = 0;
  plan.kld = true;
  EXPECT_EQ(Check(plan), "spec.evaluation.kld: needs evaluation text (spec.evaluation.uri)");
  plan.has_text = true;
  EXPECT_EQ(Check(plan), "");
  plan.max_task_drop["arc_easy"] = 0.02;
  EXPECT_EQ(Check(plan),
            "spec.evaluation.max_task_drop[arc_easy]: a gate on task \"arc_easy\", which is not "
            "evaluated (spec.evaluation.tasks: piqa)");
  plan.max_task_drop = {{"piqa", -0.5}};
  EXPECT_EQ(Check(plan), "spec.evaluation.max_task_drop[piqa]: -0.5 must be a number not below 0");
  plan.max_task_drop = {{"piqa", 0.02}};
  plan.kld = false;
  plan.max_kld = 0.01;
  EXPECT_EQ(Check(plan), "spec.evaluation.max_kld: a gate on KLD, which is not computed: set spec.evaluation.kld");
  plan.kld = true;
  EXPECT_TRUE(ValidateEvaluationPlan(plan, "spec.evaluation").ok());
}

TEST(EvaluationPlanTest, GatesJudgeEveryExportAndNameTheFigure) {
  EvaluationPlan plan;
  plan.tasks = {"arc_easy"};
  plan.kld = true;
  plan.has_text = true;
  plan.max_kld = 0.01;
  plan.max_task_drop["arc_easy"] = 0.02;
  std::map<std::string, double> metrics = {{"kld_mean_reloaded", 0.005},
                                           {"kld_mean_gguf", 0.009},
                                           {"arc_easy_acc_float", 0.5},
                                           {"arc_easy_acc_reloaded", 0.49},
                                           {"arc_easy_acc_gguf", 0.48}};  // 0.5 - 0.48 = 0.02 + 2e-17
  EXPECT_EQ(CheckEvaluationGates(plan, {"reloaded", "gguf"}, metrics), "");
  metrics["kld_mean_gguf"] = 0.0125;
  EXPECT_EQ(CheckEvaluationGates(plan, {"reloaded", "gguf"}, metrics),
            "evaluation gate: max_kld 0.01 < kld_mean_gguf 0.0125");
  metrics["kld_mean_gguf"] = 0.01;  // the bound itself passes
  metrics["arc_easy_acc_gguf"] = 0.45;
  EXPECT_EQ(CheckEvaluationGates(plan, {"reloaded", "gguf"}, metrics),
            "evaluation gate: max_task_drop[arc_easy] 0.02 < drop 0.05 (arc_easy_acc_float 0.5, arc_easy_acc_gguf "
            "0.45)");
  metrics.erase("kld_mean_reloaded");
  EXPECT_EQ(CheckEvaluationGates(plan, {"reloaded"}, metrics),
            "evaluation gate: max_kld 0.01: kld_mean_reloaded is missing");
  EXPECT_EQ(TaskMetricName("lambada_openai", "perplexity", "float"), "lambada_openai_perplexity_float");
}

TEST(EvaluationPlanTest, Gsm8kAndFewshot) {
  EvaluationPlan plan;
  plan.num_fewshot = 3;
  EXPECT_EQ(Check(plan), "spec.evaluation.num_fewshot: set, but no tasks are named");
  plan.tasks = {"gsm8k", "arc_easy"};
  plan.num_fewshot = -2;
  EXPECT_EQ(Check(plan), "spec.evaluation.num_fewshot: -2 is negative");
  plan.num_fewshot = 0;
  plan.max_task_drop["gsm8k"] = 0.05;
  EXPECT_EQ(Check(plan), "");
  EXPECT_EQ(GatedTaskMetric("gsm8k"), "exact_match_strict_match");
  const std::map<std::string, double> metrics = {{"gsm8k_exact_match_strict_match_float", 0.3},
                                                 {"gsm8k_exact_match_strict_match_reloaded", 0.2}};
  EXPECT_EQ(CheckEvaluationGates(plan, {"reloaded"}, metrics),
            "evaluation gate: max_task_drop[gsm8k] 0.05 < drop 0.1 (gsm8k_exact_match_strict_match_float 0.3, "
            "gsm8k_exact_match_strict_match_reloaded 0.2)");
}

}  // namespace
}  // namespace quark::eval
