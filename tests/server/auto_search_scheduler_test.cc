// #36 item 3: automatic searches in JobScheduler over a real SQLite store (the test is the worker). The parent's
// sensitivity passes are leased like any child; when they end quarkd searches over their figures and submits the
// verification child with the recipe; a measured miss of a loss budget is refined round by round; a failed pass
// leaves the others to search, all failed fails the parent naming why; cancel reaches the round. Plus the plan's pure
// steps (auto_search_plan.h) on stories260K's real shapes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "server/scheduler/auto_search_plan.h"
#include "server/scheduler/pass_ranges.h"
#include "tests/server/scheduler_fixture.h"

namespace quark::server {
namespace {

using quark::v1::Job;
using quark::v1::JobState;
using quark::v1::internal::CompleteRequest;
using quark::v1::internal::LeaseResponse;

constexpr char kEight[] = "w_int8_per_tensor_sym";
constexpr char kFour[] = "mxfp4_weight_only";

// Three groups of 100 weights: 800 bits each with kEight, 425 with kFour.
quark::v1::AutoSearchResult Groups() {
  quark::v1::AutoSearchResult plan;
  for (const char* name : {"q_proj", "o_proj", "down_proj"}) {
    quark::v1::AutoSearchGroup* g = plan.add_groups();
    g->set_name(std::string("model.layers.0.") + name);
    g->set_params(100);
    g->add_modules(std::string("model.layers.0.") + name);
    g->add_bits(800);
    g->add_bits(425);
  }
  plan.set_smallest_bits(4.25);
  plan.set_largest_bits(8);
  return plan;
}

class AutoSearchSchedulerTest : public testing::SchedulerFixture {
 protected:
  AutoSearchSchedulerTest() : SchedulerFixture(ShortOptions()) {}

  // The parent's spec of `search` on the fixture's model.
  static quark::v1::JobSpec AutoSpec(const quark::v1::AutoSearchSpec& search) {
    quark::v1::JobSpec spec;
    spec.set_model_uri("file:///m");
    spec.set_output_uri("file:///out");
    spec.mutable_evaluation()->set_uri("file:///eval.txt");
    *spec.mutable_auto_search() = search;
    return spec;
  }

  absl::StatusOr<Job> SubmitAuto(const quark::v1::AutoSearchSpec& search) {
    const quark::v1::JobSpec spec = AutoSpec(search);
    SweepPlan plan;
    plan.auto_search = Groups();
    for (int i = 0; i < search.candidates_size(); ++i) {
      plan.table.add_candidates()->set_scheme(search.candidates(i));
      plan.children.push_back({i, SensitivityChildSpec(spec, search.candidates(i)), {}});
    }
    return scheduler_->SubmitSweep("", spec, {}, plan);
  }

  static quark::v1::AutoSearchSpec Search(double max_ppl_increase) {
    quark::v1::AutoSearchSpec search;
    search.add_candidates(kEight);
    search.add_candidates(kFour);
    search.set_max_ppl_increase(max_ppl_increase);
    return search;
  }

  void Complete(const LeaseResponse& lease, const std::map<std::string, double>& metrics,
                const std::string& error = "") {
    CompleteRequest done;
    done.set_lease_id(lease.lease_id());
    done.set_success(error.empty());
    done.set_error(error);
    if (error.empty()) {
      done.mutable_result()->add_artifacts()->set_uri("file:///out/" + lease.job().id() + "/model.safetensors");
      done.mutable_result()->mutable_metrics()->insert(metrics.begin(), metrics.end());
    }
    ASSERT_TRUE(scheduler_->Complete(done).ok());
  }

  // A pass's figures: NLL increase per group (q_proj, o_proj, down_proj), KLD the same.
  void CompletePass(const LeaseResponse& lease, std::vector<double> nll) {
    std::map<std::string, double> metrics;
    const char* names[] = {"q_proj", "o_proj", "down_proj"};
    for (int g = 0; g < 3; ++g) {
      metrics[std::string("kld:model.layers.0.") + names[g]] = nll[g];
      metrics[std::string("nll_increase:model.layers.0.") + names[g]] = nll[g];
    }
    Complete(lease, metrics);
  }

  // The two passes, leased and completed: kEight nearly lossless, kFour worst on down_proj.
  void RunPasses() {
    scheduler_->Register(Worker("w"));
    for (int i = 0; i < 2; ++i) {
      std::optional<LeaseResponse> pass = LeaseNow("w");
      ASSERT_TRUE(pass.has_value());
      ASSERT_TRUE(pass->job().spec().sensitivity_pass());
      if (pass->job().spec().preset() == kEight) {
        CompletePass(*pass, {0.0001, 0.0001, 0.0001});
      } else {
        CompletePass(*pass, {0.001, 0.002, 0.003});
      }
    }
  }

  static quark::v1::internal::RegisterRequest Worker(const std::string& id) {
    quark::v1::internal::RegisterRequest request;
    request.set_worker_id(id);
    request.set_slots(1);
    request.add_devices("cpu");
    return request;
  }

  Job Get(const std::string& id) { return *store_->GetJob(id); }
};

TEST_F(AutoSearchSchedulerTest, AMissedLossBudgetIsRefinedUntilTheMeasurementMeetsIt) {
  absl::StatusOr<Job> parent = SubmitAuto(Search(0.01));
  ASSERT_TRUE(parent.ok()) << parent.status();
  EXPECT_EQ(parent->state(), JobState::JOB_STATE_RUNNING);
  EXPECT_EQ(scheduler_->QueueDepth(), 2);  // the passes; the parent is never queued
  RunPasses();
  // Predicted: every group with kFour adds 0.006 nats (< ln 1.01): the smallest recipe, all kFour.
  Job searching = Get(parent->id());
  ASSERT_EQ(searching.auto_search().rounds_size(), 1) << searching.DebugString();
  const quark::v1::AutoSearchRound first = searching.auto_search().rounds(0);
  EXPECT_DOUBLE_EQ(first.bits_per_weight(), 4.25);
  EXPECT_DOUBLE_EQ(first.predicted_kld(), 0.006);
  ASSERT_EQ(searching.sweep().candidates_size(), 3);
  EXPECT_EQ(searching.sweep().candidates(2).scheme(), "round 1");
  std::optional<LeaseResponse> round = LeaseNow("w");
  ASSERT_TRUE(round.has_value());
  EXPECT_EQ(round->job().id(), first.job_id());
  EXPECT_EQ(round->job().parent_id(), parent->id());
  EXPECT_FALSE(round->job().spec().has_auto_search());
  EXPECT_FALSE(round->job().spec().sensitivity_pass());
  ASSERT_TRUE(round->job().spec().has_config());
  EXPECT_EQ(round->job().spec().config().layer_quant_config_size(), 0);  // one scheme: all global
  // Measured: +2% perplexity, above the budget: the worst group (down_proj) moves up to kEight.
  Complete(*round, {{"ppl_before", 10.0}, {"ppl_reloaded", 10.2}});
  Job refined = Get(parent->id());
  EXPECT_EQ(refined.state(), JobState::JOB_STATE_RUNNING);
  ASSERT_EQ(refined.auto_search().rounds_size(), 2);
  EXPECT_NEAR(refined.auto_search().rounds(0).measured_ppl_increase(), 0.02, 1e-12);
  EXPECT_FALSE(refined.auto_search().met());
  const quark::v1::AutoSearchRound& second = refined.auto_search().rounds(1);
  EXPECT_EQ(second.choice(2), kEight);
  EXPECT_EQ(second.choice(0), kFour);
  EXPECT_NEAR(second.bits_per_weight(), (425 + 425 + 800) / 300.0, 1e-12);
  round = LeaseNow("w");
  ASSERT_TRUE(round.has_value());
  EXPECT_EQ(round->job().id(), second.job_id());
  ASSERT_EQ(round->job().spec().config().layer_quant_config_size(), 1);
  EXPECT_EQ(round->job().spec().config().layer_quant_config(0).pattern(), "model.layers.0.down_proj");
  Complete(*round, {{"ppl_before", 10.0}, {"ppl_reloaded", 10.05}});
  Job done = Get(parent->id());
  ASSERT_EQ(done.state(), JobState::JOB_STATE_SUCCEEDED) << done.DebugString();
  EXPECT_TRUE(done.auto_search().met());
  EXPECT_EQ(done.result().metrics().at("rounds"), 2);
  EXPECT_EQ(done.result().artifacts(0).uri(), "file:///out/" + second.job_id() + "/model.safetensors");
  EXPECT_NE(done.auto_search().recipe_json().find("model.layers.0.down_proj"), std::string::npos);
}

// #36 item 4: each candidate's pass split in two rows (q_proj's layers; o_proj's and down_proj's): the parent merges
// the parts and searches as over whole passes; a failed part fails its candidate, naming its layers.
TEST_F(AutoSearchSchedulerTest, SplitPassesAreMergedPerCandidateBeforeTheSearch) {
  const quark::v1::AutoSearchSpec search = Search(0.01);
  const quark::v1::JobSpec spec = AutoSpec(search);
  SweepPlan plan;
  plan.auto_search = Groups();
  for (const std::string& candidate : search.candidates()) {
    for (auto [first, count] : {std::pair<int, int>{0, 1}, {1, 2}}) {
      quark::v1::SweepCandidate* row = plan.table.add_candidates();
      row->set_scheme(candidate);
      row->set_first_layer(first);
      row->set_layer_count(count);
      quark::v1::JobSpec part = SensitivityChildSpec(spec, candidate);
      part.set_sensitivity_first_layer(first);
      part.set_sensitivity_layer_count(count);
      plan.children.push_back({plan.table.candidates_size() - 1, part, {}});
    }
  }
  plan.auto_search.set_pass_rows(plan.table.candidates_size());
  absl::StatusOr<Job> parent = scheduler_->SubmitSweep("", spec, {}, plan);
  ASSERT_TRUE(parent.ok()) << parent.status();
  EXPECT_EQ(scheduler_->QueueDepth(), 4);
  scheduler_->Register(Worker("w"));
  const char* names[] = {"q_proj", "o_proj", "down_proj"};
  for (int i = 0; i < 4; ++i) {
    std::optional<LeaseResponse> pass = LeaseNow("w");
    ASSERT_TRUE(pass.has_value());
    const bool four = pass->job().spec().preset() == kFour;
    const bool first = pass->job().spec().sensitivity_first_layer() == 0;
    std::map<std::string, double> metrics = {{"sensitivity_float_nll", 2.0}, {"sensitivity_tokens", 100}};
    for (int g = first ? 0 : 1; g < (first ? 1 : 3); ++g) {
      const double nll = four ? 0.001 * (g + 1) : 0.0001;
      metrics[std::string("kld:model.layers.0.") + names[g]] = nll;
      metrics[std::string("nll_increase:model.layers.0.") + names[g]] = nll;
    }
    Complete(*pass, metrics);
    if (i < 3) EXPECT_EQ(Get(parent->id()).auto_search().rounds_size(), 0) << "searched before every part ended";
  }
  // The same first round as the whole passes' (AMissedLossBudgetIsRefinedUntilTheMeasurementMeetsIt).
  Job searching = Get(parent->id());
  ASSERT_EQ(searching.auto_search().rounds_size(), 1) << searching.DebugString();
  EXPECT_DOUBLE_EQ(searching.auto_search().rounds(0).bits_per_weight(), 4.25);
  EXPECT_DOUBLE_EQ(searching.auto_search().rounds(0).predicted_kld(), 0.006);
  ASSERT_EQ(searching.sweep().candidates_size(), 5);
  EXPECT_EQ(searching.sweep().candidates(4).scheme(), "round 1");

  // One part of kFour fails: kFour is not searched, the message names the part.
  ASSERT_TRUE(scheduler_->Cancel(parent->id()).ok());  // its queued round ends at once
  absl::StatusOr<Job> again = scheduler_->SubmitSweep("", spec, {}, plan);
  ASSERT_TRUE(again.ok());
  for (int i = 0; i < 4; ++i) {
    std::optional<LeaseResponse> pass = LeaseNow("w");
    ASSERT_TRUE(pass.has_value());
    if (pass->job().spec().preset() == kFour && pass->job().spec().sensitivity_first_layer() == 1) {
      Complete(*pass, {}, "boom");
      continue;
    }
    std::map<std::string, double> metrics = {{"sensitivity_float_nll", 2.0}, {"sensitivity_tokens", 100}};
    for (const char* name : names) {
      metrics[std::string("kld:model.layers.0.") + name] = 0.0001;
      metrics[std::string("nll_increase:model.layers.0.") + name] = 0.0001;
    }
    Complete(*pass, metrics);
  }
  Job partial = Get(again->id());
  ASSERT_EQ(partial.auto_search().rounds_size(), 1) << partial.DebugString();
  for (const std::string& choice : partial.auto_search().rounds(0).choice()) EXPECT_EQ(choice, kEight);
  EXPECT_EQ(partial.sweep().candidates(3).state(), JobState::JOB_STATE_FAILED);
  EXPECT_EQ(MergeSplitPasses({Get(partial.sweep().candidates(2).job_id()), Get(partial.sweep().candidates(3).job_id())})
                .error()
                .rfind("layers 1..2 (job ", 0),
            0u);
}

TEST_F(AutoSearchSchedulerTest, ABudgetStillMissedAfterMaxRoundsFailsWithTheLastRecipeKept) {
  quark::v1::AutoSearchSpec search = Search(0.01);
  search.set_max_rounds(1);
  absl::StatusOr<Job> parent = SubmitAuto(search);
  ASSERT_TRUE(parent.ok());
  RunPasses();
  std::optional<LeaseResponse> round = LeaseNow("w");
  ASSERT_TRUE(round.has_value());
  Complete(*round, {{"ppl_before", 10.0}, {"ppl_reloaded", 10.2}});
  Job done = Get(parent->id());
  EXPECT_EQ(done.state(), JobState::JOB_STATE_FAILED);
  EXPECT_NE(done.error().find("the budget was not met after 1 rounds"), std::string::npos) << done.error();
  EXPECT_EQ(done.auto_search().rounds_size(), 1);
  EXPECT_FALSE(done.auto_search().recipe_json().empty());
}

TEST_F(AutoSearchSchedulerTest, FailedPassesAndCancel) {
  // One pass fails: the search runs over the other candidate alone.
  absl::StatusOr<Job> partial = SubmitAuto(Search(0.5));
  ASSERT_TRUE(partial.ok());
  scheduler_->Register(Worker("w"));
  std::optional<LeaseResponse> a = LeaseNow("w");
  ASSERT_TRUE(a.has_value());
  Complete(*a, {}, "spec.preset: boom");
  std::optional<LeaseResponse> b = LeaseNow("w");
  ASSERT_TRUE(b.has_value());
  CompletePass(*b, {0.001, 0.001, 0.001});
  Job searching = Get(partial->id());
  ASSERT_EQ(searching.auto_search().rounds_size(), 1) << searching.DebugString();
  for (const std::string& choice : searching.auto_search().rounds(0).choice())
    EXPECT_EQ(choice, b->job().spec().preset());
  // Cancelling the parent stops its running round.
  std::optional<LeaseResponse> round = LeaseNow("w");
  ASSERT_TRUE(round.has_value());
  ASSERT_TRUE(scheduler_->Cancel(partial->id()).ok());
  EXPECT_TRUE(scheduler_->Heartbeat("w", round->lease_id()).cancel());
  CompleteRequest stopped;
  stopped.set_lease_id(round->lease_id());
  stopped.set_cancelled(true);
  ASSERT_TRUE(scheduler_->Complete(stopped).ok());
  EXPECT_EQ(Get(partial->id()).state(), JobState::JOB_STATE_CANCELLED);

  // Every pass fails: the parent fails saying so.
  absl::StatusOr<Job> none = SubmitAuto(Search(0.5));
  ASSERT_TRUE(none.ok());
  for (int i = 0; i < 2; ++i) {
    std::optional<LeaseResponse> pass = LeaseNow("w");
    ASSERT_TRUE(pass.has_value());
    Complete(*pass, {}, "boom");
  }
  Job failed = Get(none->id());
  EXPECT_EQ(failed.state(), JobState::JOB_STATE_FAILED);
  EXPECT_EQ(failed.error(), "automatic search: no sensitivity pass succeeded: nothing to search");
}

TEST_F(AutoSearchSchedulerTest, ALossBudgetBelowEveryRecipeFailsWithTheSmallestPredictedLoss) {
  quark::v1::AutoSearchSpec search = Search(0);
  search.set_max_kld(1e-6);  // kEight's passes predict 3e-4 for the whole model at best
  absl::StatusOr<Job> parent = SubmitAuto(search);
  ASSERT_TRUE(parent.ok());
  RunPasses();
  const Job done = Get(parent->id());
  EXPECT_EQ(done.state(), JobState::JOB_STATE_FAILED);
  EXPECT_NE(done.error().find("automatic search: spec.auto_search.max_kld: 1e-06 is below 0.0003"), std::string::npos)
      << done.error();
  EXPECT_NE(done.error().find("the smallest predicted loss the candidates (w_int8_per_tensor_sym, mxfp4_weight_only) "
                              "reach"),
            std::string::npos)
      << done.error();
  EXPECT_EQ(done.auto_search().rounds_size(), 0);
}

// The submit-time check over stored passes (the service looks them up by the children's content keys).
TEST(AutoSearchPlanTest, ALossBudgetBelowEveryRecipeIsRefusedAtSubmitOnlyWhenEveryKeptPassIsStored) {
  quark::v1::JobSpec spec;
  spec.mutable_evaluation()->set_uri("file:///e.txt");
  spec.mutable_auto_search()->add_candidates(kEight);
  spec.mutable_auto_search()->add_candidates(kFour);
  spec.mutable_auto_search()->set_max_kld(1e-6);
  auto pass = [](const std::string& id, std::vector<double> kld) {
    Job j;
    j.set_id(id);
    j.set_state(JobState::JOB_STATE_SUCCEEDED);
    const char* names[] = {"q_proj", "o_proj", "down_proj"};
    for (int g = 0; g < 3; ++g) {
      (*j.mutable_result()->mutable_metrics())[std::string("kld:model.layers.0.") + names[g]] = kld[g];
      (*j.mutable_result()->mutable_metrics())[std::string("nll_increase:model.layers.0.") + names[g]] = kld[g];
    }
    return j;
  };
  const std::vector<Job> stored = {pass("job-eight", {0.0001, 0.0002, 0.0001}), pass("job-four", {0.001, 0.0001, 0.003})};
  absl::Status refused = CheckLossBudgetOnStoredPasses(spec, Groups(), {kEight, kFour}, stored);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  // The least per group: 0.0001 + 0.0001 + 0.0001.
  EXPECT_NE(refused.message().find("spec.auto_search.max_kld: 1e-06 is below 0.0003"), std::string::npos) << refused;
  EXPECT_NE(refused.message().find(", the smallest predicted loss the candidates"), std::string::npos) << refused;
  EXPECT_NE(refused.message().find("job-eight, job-four"), std::string::npos) << refused;
  spec.mutable_auto_search()->set_max_ppl_increase(1e-6);
  EXPECT_NE(CheckLossBudgetOnStoredPasses(spec, Groups(), {kEight, kFour}, stored)
                .message()
                .find("spec.auto_search.max_ppl_increase: 1e-06 is below 0.000300045"),
            std::string::npos);
  // A budget some recipe meets, a size budget: nothing to refuse.
  spec.mutable_auto_search()->set_max_kld(0.00031);
  EXPECT_TRUE(CheckLossBudgetOnStoredPasses(spec, Groups(), {kEight, kFour}, stored).ok());
  spec.mutable_auto_search()->set_target_bits(4.5);
  EXPECT_TRUE(CheckLossBudgetOnStoredPasses(spec, Groups(), {kEight, kFour}, stored).ok());
  // One kept candidate's pass not stored: its figures may lower the least loss, so the passes run first.
  spec.mutable_auto_search()->set_max_kld(1e-6);
  EXPECT_TRUE(CheckLossBudgetOnStoredPasses(spec, Groups(), {kEight, kFour}, {stored[0], Job()}).ok());
  // ...but a candidate dropped at submit needs none: the stored pass of the kept one decides (0.0004 alone).
  absl::Status kept_only = CheckLossBudgetOnStoredPasses(spec, Groups(), {kEight}, {stored[0], Job()});
  EXPECT_NE(kept_only.message().find("is below 0.0004"), std::string::npos) << kept_only;
}

TEST(AutoSearchPlanTest, GroupsAndSizesFromTheModelAndBudgetsRefusedAtSubmit) {
  const char* shared = std::getenv("QUARK_SHARED_DIR");
  ASSERT_NE(shared, nullptr);
  absl::StatusOr<estimate::ModelShape> shape = estimate::ReadModelShape(std::string(shared) + "/fixtures/stories260K");
  ASSERT_TRUE(shape.ok()) << shape.status();
  quark::v1::AutoSearchSpec search;
  search.add_candidates(kEight);
  search.add_candidates(kFour);
  search.set_target_bits(6);
  absl::StatusOr<quark::v1::AutoSearchResult> plan = PlanAutoSearch(*shape, search, {kEight, kFour});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->groups_size(), 20);  // 5 layers x (qkv, o_proj, gate_up, down_proj)
  const quark::v1::AutoSearchGroup& qkv = plan->groups(0);
  EXPECT_EQ(qkv.name(), "model.layers.0.self_attn.qkv");
  EXPECT_EQ(qkv.modules_size(), 3);
  EXPECT_EQ(qkv.params(), 64 * 64 + 2 * 32 * 64);  // q [64, 64], k and v [32, 64]
  // int8 per tensor: 8 bits a weight plus one scale and zero point per tensor.
  EXPECT_GT(qkv.bits(0), 8.0 * qkv.params());
  EXPECT_LT(qkv.bits(0), 8.0 * qkv.params() + 3 * 64);
  EXPECT_NEAR(plan->largest_bits(), 8.0, 0.01);
  EXPECT_GT(plan->smallest_bits(), 4.2);
  EXPECT_LT(plan->smallest_bits(), 4.5);
  // With kFour dropped at submit, 6 bits are out of reach: refused naming the field and the smallest size.
  absl::StatusOr<quark::v1::AutoSearchResult> only_eight = PlanAutoSearch(*shape, search, {kEight});
  EXPECT_EQ(only_eight.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(only_eight.status().message().find("spec.auto_search.target_bits: 6 bits per weight is below 8"),
            std::string::npos)
      << only_eight.status();
  // Field checks.
  quark::v1::JobSpec spec;
  spec.mutable_evaluation()->set_uri("file:///e");
  *spec.mutable_auto_search() = search;
  EXPECT_TRUE(ValidateAutoSearchSpec(spec).ok());
  spec.mutable_auto_search()->set_target_bits(-1);
  EXPECT_NE(ValidateAutoSearchSpec(spec).message().find("spec.auto_search.target_bits: -1"), std::string::npos);
  spec.mutable_auto_search()->set_max_rounds(99);
  spec.mutable_auto_search()->set_target_bits(5);
  EXPECT_NE(ValidateAutoSearchSpec(spec).message().find("spec.auto_search.max_rounds: 99"), std::string::npos);
  spec.mutable_auto_search()->set_max_rounds(0);
  spec.add_exclude("*.down_proj");
  EXPECT_NE(ValidateAutoSearchSpec(spec).message().find("spec.exclude: not with spec.auto_search"), std::string::npos);
  spec.clear_exclude();
  spec.set_preset("fp8");
  EXPECT_NE(ValidateAutoSearchSpec(spec).message().find("spec.preset"), std::string::npos);
  spec.clear_preset();
  spec.clear_evaluation();
  EXPECT_NE(ValidateAutoSearchSpec(spec).message().find("spec.evaluation.uri"), std::string::npos);
  // A pass child: the preset, no evaluation, the evaluation text as calibration when none is given.
  quark::v1::JobSpec parent;
  parent.mutable_evaluation()->set_uri("file:///e.txt");
  *parent.mutable_auto_search() = search;
  const quark::v1::JobSpec child = SensitivityChildSpec(parent, kFour);
  EXPECT_EQ(child.preset(), kFour);
  EXPECT_TRUE(child.sensitivity_pass());
  EXPECT_FALSE(child.has_auto_search());
  EXPECT_EQ(child.calibration().uri(), "file:///e.txt");
  EXPECT_FALSE(child.has_evaluation());
}

}  // namespace
}  // namespace quark::server
