// #36 sweep jobs in JobScheduler over a real SQLite store: the parent is never leased, its children run on the
// workers like any job, the parent's table fills as they end and the parent ends with the last one (partial
// results, or FAILED naming each child); cancel reaches the children; the tenant's quotas count the children;
// a restart catches the parent up. Plus the table's pure functions (sweep_table.h).
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "server/scheduler/sweep_table.h"
#include "tests/server/scheduler_fixture.h"

namespace quark::server {
namespace {

using quark::v1::Job;
using quark::v1::JobState;
using quark::v1::internal::CompleteRequest;
using quark::v1::internal::LeaseResponse;
using quark::v1::internal::RegisterRequest;

class SweepSchedulerTest : public testing::SchedulerFixture {
 protected:
  SweepSchedulerTest() : SchedulerFixture(ShortOptions()) {}

  static quark::v1::JobSpec ParentSpec(const std::vector<std::string>& schemes) {
    quark::v1::JobSpec spec;
    spec.set_model_uri("file:///m");
    spec.set_output_uri("file:///out");
    spec.mutable_evaluation()->set_uri("file:///eval.txt");
    for (const std::string& scheme : schemes) spec.add_sweep(scheme);
    return spec;
  }

  // One child per scheme; a scheme starting with "dropped:" is a row refused at submit, as the service plans it.
  static SweepPlan Plan(const std::vector<std::string>& schemes, const std::string& tenant = "",
                        const std::map<std::string, std::string>& keys = {}) {
    SweepPlan plan;
    for (int i = 0; i < static_cast<int>(schemes.size()); ++i) {
      quark::v1::SweepCandidate* row = plan.table.add_candidates();
      row->set_scheme(schemes[i]);
      if (schemes[i].rfind("dropped:", 0) == 0) {
        row->set_state(JobState::JOB_STATE_FAILED);
        row->set_error("dropped at submit: the model's shapes do not take it");
        continue;
      }
      SweepChild child{i, ParentSpec({}), {}};
      child.spec.set_preset(schemes[i]);
      child.options.tenant = tenant;
      if (auto key = keys.find(schemes[i]); key != keys.end()) child.options.content_key = key->second;
      plan.children.push_back(std::move(child));
    }
    return plan;
  }

  absl::StatusOr<Job> SubmitSweep(const std::vector<std::string>& schemes, const SubmitOptions& options = {},
                                  const std::string& request_id = "") {
    std::vector<std::string> names;
    for (const std::string& s : schemes) names.push_back(s.rfind("dropped:", 0) == 0 ? s.substr(8) : s);
    return scheduler_->SubmitSweep(request_id, ParentSpec(names), options, Plan(schemes, options.tenant));
  }

  void Register(const std::string& worker_id, int slots = 1) {
    RegisterRequest request;
    request.set_worker_id(worker_id);
    request.set_slots(slots);
    request.add_devices("cpu");
    scheduler_->Register(request);
  }

  // The worker's answer for a child: success with an artifact of `bytes` and the evaluation's figures.
  void Succeed(const LeaseResponse& lease, double ppl, double kld, int64_t bytes) {
    CompleteRequest done;
    done.set_lease_id(lease.lease_id());
    done.set_success(true);
    quark::v1::Artifact* artifact = done.mutable_result()->add_artifacts();
    artifact->set_uri("file:///out/" + lease.job().id() + "/model.safetensors");
    artifact->set_size_bytes(bytes);
    auto& metrics = *done.mutable_result()->mutable_metrics();
    metrics["ppl_before"] = 10.0;
    metrics["ppl_after"] = ppl + 1;  // the reloaded export's figure wins
    metrics["ppl_reloaded"] = ppl;
    metrics["kld_mean_reloaded"] = kld;
    metrics["seconds_total"] = 3.5;
    ASSERT_TRUE(scheduler_->Complete(done).ok());
  }

  void Fail(const LeaseResponse& lease, const std::string& error) {
    CompleteRequest done;
    done.set_lease_id(lease.lease_id());
    done.set_error(error);
    ASSERT_TRUE(scheduler_->Complete(done).ok());
  }

  Job Get(const std::string& id) { return *store_->GetJob(id); }
};

TEST_F(SweepSchedulerTest, ChildrenRunOnTheWorkersAndTheParentTablesThem) {
  absl::StatusOr<Job> parent = SubmitSweep({"uint4_wo_128", "int8", "dropped:mxfp4"});
  ASSERT_TRUE(parent.ok()) << parent.status();
  EXPECT_EQ(parent->state(), JobState::JOB_STATE_RUNNING);
  ASSERT_EQ(parent->sweep().candidates_size(), 3);
  EXPECT_EQ(scheduler_->QueueDepth(), 2);  // the two children; the parent is never queued
  Register("w1");
  Register("w2");
  Register("w3");
  std::optional<LeaseResponse> a = LeaseNow("w1");
  std::optional<LeaseResponse> b = LeaseNow("w2");
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(LeaseNow("w3").has_value());  // nothing left: the parent is not leasable
  for (const LeaseResponse* lease : {&*a, &*b}) {
    EXPECT_EQ(lease->job().parent_id(), parent->id());
    EXPECT_TRUE(lease->job().spec().sweep().empty());
  }
  const bool a_is_uint4 = a->job().spec().preset() == "uint4_wo_128";
  Succeed(*a, a_is_uint4 ? 11.0 : 10.1, a_is_uint4 ? 0.05 : 0.002, a_is_uint4 ? 1000 : 2000);
  EXPECT_EQ(Get(parent->id()).state(), JobState::JOB_STATE_RUNNING);
  Succeed(*b, a_is_uint4 ? 10.1 : 11.0, a_is_uint4 ? 0.002 : 0.05, a_is_uint4 ? 2000 : 1000);

  Job done = Get(parent->id());
  ASSERT_EQ(done.state(), JobState::JOB_STATE_SUCCEEDED) << done.DebugString();
  EXPECT_EQ(done.error(), "");
  EXPECT_DOUBLE_EQ(done.sweep().ppl_float(), 10.0);
  const quark::v1::SweepCandidate& uint4 = done.sweep().candidates(0);
  EXPECT_EQ(uint4.scheme(), "uint4_wo_128");
  EXPECT_EQ(uint4.state(), JobState::JOB_STATE_SUCCEEDED);
  EXPECT_DOUBLE_EQ(uint4.ppl(), 11.0);
  EXPECT_DOUBLE_EQ(uint4.kld(), 0.05);
  EXPECT_EQ(uint4.size_bytes(), 1000);
  EXPECT_DOUBLE_EQ(uint4.seconds(), 3.5);
  EXPECT_EQ(done.sweep().candidates(1).size_bytes(), 2000);
  EXPECT_EQ(done.sweep().candidates(2).state(), JobState::JOB_STATE_FAILED);
  EXPECT_EQ(done.sweep().candidates(2).job_id(), "");
  EXPECT_EQ(done.result().metrics().at("candidates_succeeded"), 2);
  EXPECT_EQ(done.result().metrics().at("ppl:int8"), 10.1);
  EXPECT_TRUE(done.attempts().empty());
}

TEST_F(SweepSchedulerTest, OneFailedChildLeavesPartialResultsAllFailedFailsNamingEachChild) {
  absl::StatusOr<Job> partial = SubmitSweep({"uint4_wo_128", "int8"});
  ASSERT_TRUE(partial.ok());
  Register("w", 2);
  std::optional<LeaseResponse> a = LeaseNow("w");
  std::optional<LeaseResponse> b = LeaseNow("w");
  ASSERT_TRUE(a && b);
  Fail(*a, "spec.preset: boom");
  Succeed(*b, 10.5, 0.01, 500);
  Job done = Get(partial->id());
  EXPECT_EQ(done.state(), JobState::JOB_STATE_SUCCEEDED);
  int failed_row = done.sweep().candidates(0).job_id() == a->job().id() ? 0 : 1;
  EXPECT_EQ(done.sweep().candidates(failed_row).error(), "spec.preset: boom");
  EXPECT_EQ(done.sweep().candidates(failed_row).state(), JobState::JOB_STATE_FAILED);

  absl::StatusOr<Job> none = SubmitSweep({"uint4_wo_128", "int8"});
  ASSERT_TRUE(none.ok());
  a = LeaseNow("w");
  b = LeaseNow("w");
  ASSERT_TRUE(a && b);
  Fail(*a, "first failure");
  Fail(*b, "second failure");
  Job failed = Get(none->id());
  EXPECT_EQ(failed.state(), JobState::JOB_STATE_FAILED);
  EXPECT_NE(failed.error().find("every candidate of the sweep failed"), std::string::npos) << failed.error();
  EXPECT_NE(failed.error().find("job " + a->job().id() + "): JOB_STATE_FAILED: first failure"), std::string::npos)
      << failed.error();
  EXPECT_NE(failed.error().find("job " + b->job().id() + "): JOB_STATE_FAILED: second failure"), std::string::npos);
}

TEST_F(SweepSchedulerTest, CancelReachesQueuedAndRunningChildren) {
  absl::StatusOr<Job> parent = SubmitSweep({"uint4_wo_128", "int8", "fp8"});
  ASSERT_TRUE(parent.ok());
  Register("w");
  std::optional<LeaseResponse> running = LeaseNow("w");
  ASSERT_TRUE(running.has_value());
  absl::StatusOr<Job> cancelled = scheduler_->Cancel(parent->id());
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  // The queued children ended at once; the running one is being stopped, so the parent waits for it.
  EXPECT_EQ(cancelled->state(), JobState::JOB_STATE_RUNNING);
  int queued_cancelled = 0;
  const Job waiting = Get(parent->id());
  for (const auto& row : waiting.sweep().candidates()) {
    if (row.job_id() == running->job().id()) continue;
    EXPECT_EQ(Get(row.job_id()).state(), JobState::JOB_STATE_CANCELLED);
    ++queued_cancelled;
  }
  EXPECT_EQ(queued_cancelled, 2);
  EXPECT_TRUE(scheduler_->Heartbeat("w", running->lease_id()).cancel());
  CompleteRequest stopped;
  stopped.set_lease_id(running->lease_id());
  stopped.set_cancelled(true);
  ASSERT_TRUE(scheduler_->Complete(stopped).ok());
  Job done = Get(parent->id());
  EXPECT_EQ(done.state(), JobState::JOB_STATE_CANCELLED);
  EXPECT_EQ(Get(running->job().id()).state(), JobState::JOB_STATE_CANCELLED);
  EXPECT_EQ(done.error(), "cancelled: 0 of 3 candidates had succeeded");
}

TEST_F(SweepSchedulerTest, QuotasCountTheChildrenNotTheParent) {
  SubmitOptions options;
  options.tenant = "t";
  options.max_queued_jobs = 2;
  absl::StatusOr<Job> refused = SubmitSweep({"uint4_wo_128", "int8", "fp8"}, options);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("spec.sweep's 3 child jobs would make 3 jobs queued"), std::string::npos)
      << refused.status();
  EXPECT_EQ(scheduler_->QueueDepth(), 0);
  options.max_queued_jobs = 3;
  absl::StatusOr<Job> parent = SubmitSweep({"uint4_wo_128", "int8", "fp8"}, options, "req-1");
  ASSERT_TRUE(parent.ok()) << parent.status();
  EXPECT_EQ(parent->tenant(), "t");
  for (const auto& row : parent->sweep().candidates()) EXPECT_EQ(Get(row.job_id()).tenant(), "t");
  // Idempotent: the same request id answers the same parent (no new children).
  absl::StatusOr<Job> again = SubmitSweep({"uint4_wo_128", "int8", "fp8"}, options, "req-1");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->id(), parent->id());
  EXPECT_EQ(scheduler_->QueueDepth(), 3);
  // The running limit holds the children to one at a time; the RUNNING parent takes no slot of it.
  scheduler_->SetTenantRunningLimits({{"t", 1}});
  Register("w", 3);
  std::optional<LeaseResponse> first = LeaseNow("w");
  ASSERT_TRUE(first.has_value());
  EXPECT_FALSE(LeaseNow("w").has_value());
  Succeed(*first, 10.2, 0.01, 100);
  EXPECT_TRUE(LeaseNow("w").has_value());
}

TEST_F(SweepSchedulerTest, ARestartRequeuesRunningChildrenAndTheParentStillEndsWithThem) {
  absl::StatusOr<Job> parent = SubmitSweep({"uint4_wo_128", "int8"});
  ASSERT_TRUE(parent.ok());
  Register("w", 2);
  std::optional<LeaseResponse> a = LeaseNow("w");
  std::optional<LeaseResponse> b = LeaseNow("w");
  ASSERT_TRUE(a && b);
  Succeed(*a, 10.3, 0.01, 100);
  Open();  // quarkd restarts: b's lease is lost and b requeued; the parent stays RUNNING, not queued
  EXPECT_EQ(Get(parent->id()).state(), JobState::JOB_STATE_RUNNING);
  EXPECT_EQ(scheduler_->QueueDepth(), 1);
  Register("w2");
  std::optional<LeaseResponse> again = LeaseNow("w2");
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->job().id(), b->job().id());
  Succeed(*again, 10.4, 0.02, 200);
  Job done = Get(parent->id());
  EXPECT_EQ(done.state(), JobState::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(done.result().metrics().at("candidates_succeeded"), 2);
}

TEST_F(SweepSchedulerTest, ChildrenAreDeduplicatedByTheirContentKeys) {
  // A first sweep's int8 child succeeds; a second sweep with the same keys gets it at once and runs only the other.
  std::map<std::string, std::string> keys = {{"int8", "key-int8"}, {"fp8", "key-fp8"}};
  absl::StatusOr<Job> first = scheduler_->SubmitSweep("", ParentSpec({"int8"}), {}, Plan({"int8"}, "", keys));
  ASSERT_TRUE(first.ok());
  Register("w");
  std::optional<LeaseResponse> lease = LeaseNow("w");
  ASSERT_TRUE(lease.has_value());
  Succeed(*lease, 10.1, 0.003, 300);
  absl::StatusOr<Job> second =
      scheduler_->SubmitSweep("", ParentSpec({"int8", "fp8"}), {}, Plan({"int8", "fp8"}, "", keys));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->state(), JobState::JOB_STATE_RUNNING);
  const quark::v1::SweepCandidate& reused = second->sweep().candidates(0);
  EXPECT_EQ(reused.state(), JobState::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(Get(reused.job_id()).deduplicated_from(), lease->job().id());
  EXPECT_DOUBLE_EQ(reused.ppl(), 10.1);
  EXPECT_EQ(scheduler_->QueueDepth(), 1);
  // Every child deduplicated: the parent ends at submission.
  absl::StatusOr<Job> third = scheduler_->SubmitSweep("", ParentSpec({"int8"}), {}, Plan({"int8"}, "", keys));
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->state(), JobState::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(third->sweep().candidates(0).size_bytes(), 300);
}

TEST(SweepTableTest, OutcomeAndRowText) {
  quark::v1::SweepResult table;
  quark::v1::SweepCandidate* row = table.add_candidates();
  row->set_scheme("int8");
  row->set_job_id("job-1");
  row->set_state(JobState::JOB_STATE_RUNNING);
  EXPECT_FALSE(SweepFinished(table));
  Job child;
  child.set_id("job-1");
  child.set_state(JobState::JOB_STATE_SUCCEEDED);
  (*child.mutable_result()->mutable_metrics())["ppl_after"] = 9.5;  // no reloaded figure: ppl_after
  ASSERT_TRUE(FillSweepRow(child, &table));
  EXPECT_DOUBLE_EQ(table.candidates(0).ppl(), 9.5);
  child.set_id("job-2");
  EXPECT_FALSE(FillSweepRow(child, &table));
  EXPECT_TRUE(SweepFinished(table));
  EXPECT_EQ(SweepOutcome(table, false).first, JobState::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(SweepOutcome(table, true).first, JobState::JOB_STATE_CANCELLED);
  EXPECT_EQ(SweepRowText(table.candidates(0)),
            "int8 (job job-1) JOB_STATE_SUCCEEDED: 0 bytes, 0.000 bits/weight, ppl 9.5, kld 0");
}

}  // namespace
}  // namespace quark::server

namespace quark::server {
namespace {

// #36 item 1: a child's task scores (the gated metric of the export read back: hf_quark's, else gguf's) land in its
// row, the float ones in the table, and both in the parent's metrics as task:TASK:SCHEME / task:TASK:float.
TEST(SweepTableTest, TaskScoresOfTheExportReadBackAndTheFloatModel) {
  quark::v1::SweepResult table;
  for (const char* scheme : {"int8", "fp8"}) {
    quark::v1::SweepCandidate* row = table.add_candidates();
    row->set_scheme(scheme);
    row->set_job_id(std::string("job-") + scheme);
  }
  Job child;
  child.set_id("job-int8");
  child.set_state(JobState::JOB_STATE_SUCCEEDED);
  child.mutable_spec()->mutable_evaluation()->add_tasks("arc_easy");
  child.mutable_spec()->mutable_evaluation()->add_tasks("gsm8k");
  auto& m = *child.mutable_result()->mutable_metrics();
  m["arc_easy_acc_reloaded"] = 0.5;
  m["arc_easy_acc_gguf"] = 0.25;  // hf_quark's read-back is the row's, as its perplexity
  m["arc_easy_acc_norm_reloaded"] = 0.75;
  m["arc_easy_acc_float"] = 0.625;
  m["gsm8k_exact_match_strict_match_gguf"] = 0.125;  // a GGUF-only job: gguf's
  m["gsm8k_exact_match_strict_match_float"] = 0.375;
  ASSERT_TRUE(FillSweepRow(child, &table));
  child.set_id("job-fp8");
  m["arc_easy_acc_reloaded"] = 0.375;
  m["arc_easy_acc_float"] = 0.0;  // the first child's float figures stay
  ASSERT_TRUE(FillSweepRow(child, &table));
  const quark::v1::SweepCandidate& row = table.candidates(0);
  ASSERT_EQ(row.task_scores_size(), 2);
  EXPECT_EQ(row.task_scores().at("arc_easy"), 0.5);
  EXPECT_EQ(row.task_scores().at("gsm8k"), 0.125);
  EXPECT_EQ(table.task_scores_float().at("arc_easy"), 0.625);
  EXPECT_EQ(table.task_scores_float().at("gsm8k"), 0.375);
  const quark::v1::JobResult result = SweepJobResult(table);
  EXPECT_EQ(result.metrics().at("task:arc_easy:int8"), 0.5);
  EXPECT_EQ(result.metrics().at("task:arc_easy:fp8"), 0.375);
  EXPECT_EQ(result.metrics().at("task:gsm8k:float"), 0.375);
  EXPECT_NE(SweepRowText(row).find(", arc_easy 0.5000, gsm8k 0.1250"), std::string::npos) << SweepRowText(row);
}

}  // namespace
}  // namespace quark::server
