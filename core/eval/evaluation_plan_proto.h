// JobSpec.evaluation (service.proto) as an EvaluationPlan: quarkd checks it at SubmitJob, the worker runs it.
#pragma once

#include "core/eval/evaluation_plan.h"
#include "quark/v1/service.pb.h"

namespace quark::eval {

inline EvaluationPlan PlanFromProto(const quark::v1::EvaluationSpec& spec) {
  EvaluationPlan plan;
  plan.tasks.assign(spec.tasks().begin(), spec.tasks().end());
  plan.task_limit = spec.task_limit();
  if (spec.has_num_fewshot()) plan.num_fewshot = spec.num_fewshot();
  plan.kld = spec.kld();
  plan.has_text = !spec.uri().empty();
  if (spec.has_max_kld()) plan.max_kld = spec.max_kld();
  plan.max_task_drop.insert(spec.max_task_drop().begin(), spec.max_task_drop().end());
  return plan;
}

}  // namespace quark::eval
