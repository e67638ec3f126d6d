#include "core/eval/evaluation_plan.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/base/strings.h"
#include "core/eval/task_docs.h"

namespace quark::eval {
namespace {

absl::Status Bad(const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(StrCat(field, ": ", why));
}

constexpr double kDropTolerance = 1e-9;

std::string Figure(double value) { return fmt::format("{:.6g}", value); }

}  // namespace

absl::Status ValidateEvaluationPlan(const EvaluationPlan& plan, const std::string& prefix) {
  std::set<std::string> seen;
  for (size_t i = 0; i < plan.tasks.size(); ++i) {
    const std::string field = StrCat(prefix, ".tasks[", i, "]");
    if (!FindTask(plan.tasks[i]).ok()) {
      std::vector<std::string> known;
      for (const TaskInfo& t : KnownTasks()) known.push_back(t.name);
      return Bad(field, StrCat("unknown task \"", plan.tasks[i], "\" (known: ", StrJoin(known, ", "), ")"));
    }
    if (!seen.insert(plan.tasks[i]).second) return Bad(field, StrCat("\"", plan.tasks[i], "\" is named twice"));
  }
  if (plan.task_limit < 0) return Bad(prefix + ".task_limit", StrCat(plan.task_limit, " is negative"));
  if (plan.task_limit > 0 && plan.tasks.empty()) return Bad(prefix + ".task_limit", "set, but no tasks are named");
  if (plan.num_fewshot) {
    if (*plan.num_fewshot < 0) return Bad(prefix + ".num_fewshot", StrCat(*plan.num_fewshot, " is negative"));
    if (plan.tasks.empty()) return Bad(prefix + ".num_fewshot", "set, but no tasks are named");
  }
  if (plan.kld && !plan.has_text) return Bad(prefix + ".kld", StrCat("needs evaluation text (", prefix, ".uri)"));
  if (plan.max_kld) {
    const std::string field = prefix + ".max_kld";
    if (!plan.kld) return Bad(field, StrCat("a gate on KLD, which is not computed: set ", prefix, ".kld"));
    if (!(*plan.max_kld >= 0)) return Bad(field, StrCat(*plan.max_kld, " must be a number not below 0"));
  }
  for (const auto& [task, bound] : plan.max_task_drop) {
    const std::string field = StrCat(prefix, ".max_task_drop[", task, "]");
    if (!seen.count(task)) {
      return Bad(field, StrCat("a gate on task \"", task, "\", which is not evaluated (", prefix,
                               ".tasks: ", plan.tasks.empty() ? std::string("none") : StrJoin(plan.tasks, ", "), ")"));
    }
    if (!(bound >= 0)) return Bad(field, StrCat(bound, " must be a number not below 0"));
  }
  return absl::OkStatus();
}

std::string GatedTaskMetric(const std::string& task) { return task == "gsm8k" ? "exact_match_strict_match" : "acc"; }

std::string TaskMetricName(const std::string& task, const std::string& metric, const std::string& label) {
  return StrCat(task, "_", metric, "_", label);
}

std::string CheckEvaluationGates(const EvaluationPlan& plan, const std::vector<std::string>& labels,
                                 const std::map<std::string, double>& metrics) {
  auto find = [&metrics](const std::string& name) -> std::optional<double> {
    auto it = metrics.find(name);
    if (it == metrics.end()) return std::nullopt;
    return it->second;
  };
  for (const std::string& label : labels) {
    if (!plan.max_kld) break;
    const std::string name = "kld_mean_" + label;
    const std::optional<double> kld = find(name);
    if (!kld) return StrCat("evaluation gate: max_kld ", Figure(*plan.max_kld), ": ", name, " is missing");
    if (!(*kld <= *plan.max_kld)) {
      return StrCat("evaluation gate: max_kld ", Figure(*plan.max_kld), " < ", name, " ", Figure(*kld));
    }
  }
  for (const auto& [task, bound] : plan.max_task_drop) {
    const std::string metric = GatedTaskMetric(task);
    const std::string float_name = TaskMetricName(task, metric, "float");
    const std::optional<double> before = find(float_name);
    if (!before) return StrCat("evaluation gate: max_task_drop[", task, "]: ", float_name, " is missing");
    for (const std::string& label : labels) {
      const std::string name = TaskMetricName(task, metric, label);
      const std::optional<double> after = find(name);
      if (!after) return StrCat("evaluation gate: max_task_drop[", task, "]: ", name, " is missing");
      // Accuracies are multiples of 1/examples: a drop equal to the bound but for binary rounding holds.
      const double drop = *before - *after;
      if (!(drop <= bound + kDropTolerance)) {
        return StrCat("evaluation gate: max_task_drop[", task, "] ", Figure(bound), " < drop ", Figure(drop), " (",
                      float_name, " ", Figure(*before), ", ", name, " ", Figure(*after), ")");
      }
    }
  }
  return "";
}

}  // namespace quark::eval
