// #36 items 1 and 4 through the whole house (a real quarkd over loopback gRPC, real quark-workers from its pool):
// a sweep with evaluation tasks carries each child's task scores into its row, the parent's metrics and quarkctl's
// table, equal to those of a plain job of the same scheme; an automatic search on four workers splits each
// candidate's sensitivity pass by layer range, and the merged figures equal the unsplit pass's bit for bit; split and
// whole passes are reused by content key; ranges that do not tile the layers are refused naming the field.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "quark/v1/service.grpc.pb.h"
#include "tests/client/run_ctl.h"
#include "tests/support/require_peer.h"
#include "tests/worker/support/quarkd.h"
#include "tests/worker/support/run_job.h"
#include "tests/worker/support/sweep_e2e_fixture.h"

namespace quark::worker {
namespace {

namespace fs = std::filesystem;
using sweep_e2e::Fixtures;
using sweep_e2e::SweepE2eTest;

// The workers quarkd's scheduler registered (its own line: the workers' "registered with" lines are in the log too).
int Registered(const std::string& log) {
  const std::regex line("worker=([^ ]+) registered slots=");
  std::set<std::string> workers;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), line); it != std::sregex_iterator(); ++it) {
    workers.insert((*it)[1].str());
  }
  return static_cast<int>(workers.size());
}

TEST_F(SweepE2eTest, ASweepsRowsCarryEachChildsTaskScoresAsAPlainJobOfTheSchemeScoresThem) {
  if (!fs::exists(quark::testing::BuiltBinary("worker/quark-worker"))) {
    QUARK_PEER_MISSING() << "quark-worker (the engine build) not built";
  }
  Start(2, "", "worker/quark-worker", {"--worker-arg=--tasks-dir=" + Fixtures() + "/tasks"});
  ASSERT_NE(quarkd_, nullptr);
  quark::v1::SubmitJobRequest request = SweepRequest({"w_int8_per_tensor_sym", "mxfp4_weight_only"});
  quark::v1::JobSpec* spec = request.mutable_spec();
  spec->set_max_attempts(1);
  spec->mutable_evaluation()->set_seq_len(128);
  spec->mutable_evaluation()->set_max_windows(1);
  spec->mutable_evaluation()->add_tasks("arc_easy");
  spec->mutable_evaluation()->add_tasks("piqa");
  spec->mutable_evaluation()->set_task_limit(4);
  const quark::v1::Job parent = RunToEnd(request);
  ASSERT_EQ(parent.state(), quark::v1::JOB_STATE_SUCCEEDED) << parent.DebugString() << quarkd_->Log();
  ASSERT_EQ(parent.sweep().candidates_size(), 2);
  const auto& parent_metrics = parent.result().metrics();
  for (const quark::v1::SweepCandidate& row : parent.sweep().candidates()) {
    const quark::v1::Job child = Get(row.job_id());
    ASSERT_EQ(child.state(), quark::v1::JOB_STATE_SUCCEEDED) << child.error();
    ASSERT_EQ(row.task_scores_size(), 2) << row.DebugString();
    for (const char* task : {"arc_easy", "piqa"}) {
      const double score = child.result().metrics().at(std::string(task) + "_acc_reloaded");
      EXPECT_EQ(row.task_scores().at(task), score) << row.scheme() << " " << task;
      EXPECT_EQ(parent_metrics.at("task:" + std::string(task) + ":" + row.scheme()), score);
      EXPECT_EQ(parent.sweep().task_scores_float().at(task),
                child.result().metrics().at(std::string(task) + "_acc_float"));
    }
  }
  EXPECT_EQ(parent_metrics.at("task:piqa:float"), parent.sweep().task_scores_float().at("piqa"));

  // int8 alone as a plain job (forced past deduplication, no parent: it scores the float model itself): its task
  // scores are the sweep row's, bit for bit.
  quark::v1::SubmitJobRequest alone = request;
  alone.mutable_spec()->clear_sweep();
  alone.mutable_spec()->set_preset("w_int8_per_tensor_sym");
  alone.mutable_spec()->set_force(true);
  const quark::v1::Job single = RunToEnd(alone);
  ASSERT_EQ(single.state(), quark::v1::JOB_STATE_SUCCEEDED) << single.error();
  for (const char* task : {"arc_easy", "piqa"}) {
    EXPECT_EQ(single.result().metrics().at(std::string(task) + "_acc_reloaded"),
              parent.sweep().candidates(0).task_scores().at(task))
        << task;
    EXPECT_EQ(single.result().metrics().at(std::string(task) + "_acc_float"),
              parent.sweep().task_scores_float().at(task));
  }
  // quarkctl get shows a column per task and the float scores.
  client::CtlRun get = client::RunCtl({"--server", quarkd_->address(), "get", parent.id()});
  EXPECT_NE(get.out.find("float task scores:"), std::string::npos) << get.out;
  EXPECT_NE(get.out.find("arc_easy"), std::string::npos) << get.out;
  EXPECT_NE(get.out.find("    piqa"), std::string::npos) << get.out;
}

TEST_F(SweepE2eTest, SearchPassesSplitByLayerRangeOverFourWorkersMergeToTheUnsplitFiguresBitForBit) {
  if (!fs::exists(quark::testing::BuiltBinary("worker/quark-worker"))) {
    QUARK_PEER_MISSING() << "quark-worker (the engine build) not built";
  }
  Start(4, "", "worker/quark-worker");
  ASSERT_NE(quarkd_, nullptr);
  ASSERT_TRUE(quark::testing::WaitUntil([&] { return Registered(quarkd_->Log()) >= 4; }, std::chrono::seconds(120)))
      << quarkd_->Log();
  quark::v1::SubmitJobRequest request = SweepRequest({});
  quark::v1::JobSpec* spec = request.mutable_spec();
  spec->set_max_attempts(1);
  spec->mutable_evaluation()->set_seq_len(128);
  spec->mutable_evaluation()->set_max_windows(1);
  spec->mutable_calibration()->set_num_samples(4);
  spec->mutable_calibration()->set_seq_len(64);
  for (const char* c : {"w_int8_per_tensor_sym", "mxfp4_weight_only"}) spec->mutable_auto_search()->add_candidates(c);
  spec->mutable_auto_search()->set_target_bits(6.0);

  // Four live workers, two candidates: quarkd splits each pass in two ranges of stories260K's 5 layers.
  const quark::v1::Job split = RunToEnd(request);
  ASSERT_EQ(split.state(), quark::v1::JOB_STATE_SUCCEEDED) << split.DebugString() << quarkd_->Log();
  ASSERT_EQ(split.auto_search().pass_rows(), 4) << split.DebugString();
  ASSERT_EQ(split.sweep().candidates_size(), 5);  // 2 x 2 ranges, then round 1
  std::map<std::string, double> merged[2];
  for (int r = 0; r < 4; ++r) {
    const quark::v1::SweepCandidate& row = split.sweep().candidates(r);
    ASSERT_EQ(row.state(), quark::v1::JOB_STATE_SUCCEEDED) << row.DebugString();
    EXPECT_EQ(row.scheme(), spec->auto_search().candidates(r / 2));
    EXPECT_EQ(row.first_layer(), r % 2 == 0 ? 0 : split.sweep().candidates(r - 1).layer_count());
    EXPECT_GT(row.layer_count(), 0);
    const quark::v1::Job part = Get(row.job_id());
    EXPECT_EQ(part.spec().sensitivity_first_layer(), row.first_layer());
    EXPECT_EQ(part.spec().sensitivity_layer_count(), row.layer_count());
    for (const auto& [name, value] : part.result().metrics()) {
      if (name.rfind("kld:", 0) == 0 || name.rfind("nll_increase:", 0) == 0) {
        EXPECT_TRUE(merged[r / 2].emplace(name, value).second) << name << " measured by two ranges";
      }
    }
  }
  EXPECT_EQ(split.sweep().candidates(0).layer_count() + split.sweep().candidates(1).layer_count(), 5);

  // The same search unsplit (pass_splits 1): whole passes, other content keys; every group's figures equal.
  quark::v1::SubmitJobRequest whole_request = request;
  whole_request.mutable_spec()->mutable_auto_search()->set_pass_splits(1);
  const quark::v1::Job whole = RunToEnd(whole_request);
  ASSERT_EQ(whole.state(), quark::v1::JOB_STATE_SUCCEEDED) << whole.DebugString();
  ASSERT_EQ(whole.sweep().candidates_size(), 3);
  for (int c = 0; c < 2; ++c) {
    const quark::v1::Job pass = Get(whole.sweep().candidates(c).job_id());
    EXPECT_TRUE(pass.deduplicated_from().empty());
    EXPECT_EQ(pass.spec().sensitivity_layer_count(), 0);
    size_t figures = 0;
    for (const auto& [name, value] : pass.result().metrics()) {
      if (name.rfind("kld:", 0) != 0 && name.rfind("nll_increase:", 0) != 0) continue;
      ++figures;
      ASSERT_EQ(merged[c].count(name), 1u) << name;
      EXPECT_EQ(merged[c].at(name), value) << name;  // bit for bit
    }
    EXPECT_EQ(figures, 40u);  // 20 groups x (kld, nll_increase)
    EXPECT_EQ(merged[c].size(), figures);
  }
  EXPECT_EQ(whole.auto_search().rounds(0).predicted_kld(), split.auto_search().rounds(0).predicted_kld());
  EXPECT_EQ(std::vector<std::string>(whole.auto_search().rounds(0).choice().begin(),
                                     whole.auto_search().rounds(0).choice().end()),
            std::vector<std::string>(split.auto_search().rounds(0).choice().begin(),
                                     split.auto_search().rounds(0).choice().end()));

  // Again split by explicit ranges equal to quarkd's: the parts are reused by content key.
  quark::v1::SubmitJobRequest ranges_request = request;
  for (int r = 0; r < 2; ++r) {
    quark::v1::LayerRange* range = ranges_request.mutable_spec()->mutable_auto_search()->add_pass_layer_ranges();
    range->set_first(split.sweep().candidates(r).first_layer());
    range->set_count(split.sweep().candidates(r).layer_count());
  }
  ranges_request.mutable_spec()->mutable_auto_search()->set_target_bits(7.0);
  // The whole passes are stored now too: the policy would reuse them; explicit ranges ask for the parts.
  const quark::v1::Job reused = RunToEnd(ranges_request);
  ASSERT_EQ(reused.state(), quark::v1::JOB_STATE_SUCCEEDED) << reused.DebugString();
  ASSERT_EQ(reused.auto_search().pass_rows(), 2) << "whole passes stored: reused unsplit";
  for (int c = 0; c < 2; ++c) {
    EXPECT_EQ(Get(reused.sweep().candidates(c).job_id()).deduplicated_from(), whole.sweep().candidates(c).job_id());
  }
  // The policy on fresh text (another calibration seed): no whole pass stored, split again; then the same search
  // once more reuses each part.
  quark::v1::SubmitJobRequest seeded = request;
  seeded.mutable_spec()->mutable_calibration()->set_seed(7);
  const quark::v1::Job first = RunToEnd(seeded);
  ASSERT_EQ(first.state(), quark::v1::JOB_STATE_SUCCEEDED) << first.DebugString();
  ASSERT_EQ(first.auto_search().pass_rows(), 4);
  seeded.mutable_spec()->mutable_auto_search()->set_target_bits(7.0);
  const quark::v1::Job second = RunToEnd(seeded);
  ASSERT_EQ(second.state(), quark::v1::JOB_STATE_SUCCEEDED) << second.DebugString();
  ASSERT_EQ(second.auto_search().pass_rows(), 4);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(Get(second.sweep().candidates(r).job_id()).deduplicated_from(), first.sweep().candidates(r).job_id());
  }

  // Bad input names the field.
  quark::v1::SubmitJobRequest gap = request;
  for (auto [f, n] : {std::pair<int, int>{0, 2}, {3, 2}}) {
    quark::v1::LayerRange* range = gap.mutable_spec()->mutable_auto_search()->add_pass_layer_ranges();
    range->set_first(f);
    range->set_count(n);
  }
  EXPECT_NE(Refusal(gap).find("spec.auto_search.pass_layer_ranges[1]: starts at layer 3, not at 2"),
            std::string::npos);
  quark::v1::SubmitJobRequest too_many = request;
  too_many.mutable_spec()->mutable_auto_search()->set_pass_splits(6);
  EXPECT_NE(Refusal(too_many).find("spec.auto_search.pass_splits: 6"), std::string::npos);
  quark::v1::SubmitJobRequest by_hand = request;
  by_hand.mutable_spec()->clear_auto_search();
  by_hand.mutable_spec()->set_preset("fp8");
  by_hand.mutable_spec()->set_sensitivity_layer_count(2);
  EXPECT_NE(Refusal(by_hand).find("spec.sensitivity_first_layer / spec.sensitivity_layer_count"), std::string::npos);
}

}  // namespace
}  // namespace quark::worker
