// #36: quarkctl's --sweep flag into spec.sweep, and the sweep table it prints for a parent job; --auto into
// spec.auto_search (item 3) and the rounds it prints.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "client/output.h"
#include "client/submit_spec.h"
#include "client/sweep_output.h"
#include "tests/storage/support/subprocess.h"

namespace quark::client {
namespace {

TEST(SweepFlagTest, CommaListsAndRepeatsBecomeSpecSweep) {
  SubmitFlags flags;
  flags.model = "file:///m";
  flags.output = "file:///o";
  flags.sweep = {"uint4_wo_128, int8", "fp8"};
  absl::StatusOr<quark::v1::JobSpec> spec = BuildJobSpec(flags);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->sweep_size(), 3);
  EXPECT_EQ(spec->sweep(1), "int8");
  EXPECT_EQ(spec->quantization_case(), quark::v1::JobSpec::QUANTIZATION_NOT_SET);
}

TEST(SweepFlagTest, ReplacesTheJobFilesPresetAndRefusesScheme) {
  testing::TempDir dir;
  const std::string file = (dir.path() / "job.json").string();
  std::ofstream(file) << R"({"model_uri": "file:///m", "output_uri": "file:///o", "preset": "int8"})";
  SubmitFlags flags;
  flags.job_file = file;
  flags.sweep = {"fp8,int8"};
  absl::StatusOr<quark::v1::JobSpec> spec = BuildJobSpec(flags);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->quantization_case(), quark::v1::JobSpec::QUANTIZATION_NOT_SET);
  EXPECT_EQ(spec->sweep_size(), 2);
  flags.scheme = "int8";
  EXPECT_NE(BuildJobSpec(flags).status().message().find("--sweep"), std::string::npos);
  flags.scheme.clear();
  flags.sweep = {"fp8,,int8"};
  EXPECT_NE(BuildJobSpec(flags).status().message().find("--sweep: \"fp8,,int8\" has an empty item"),
            std::string::npos);
}

TEST(SweepTableOutputTest, RowsForSucceededDroppedAndFailedCandidates) {
  quark::v1::Job parent;
  parent.set_id("job-p");
  parent.set_state(quark::v1::JOB_STATE_SUCCEEDED);
  parent.mutable_spec()->add_sweep("int8");
  parent.mutable_spec()->add_sweep("uint4_wo_128");
  quark::v1::SweepResult* sweep = parent.mutable_sweep();
  sweep->set_ppl_float(10.0);
  quark::v1::SweepCandidate* ok = sweep->add_candidates();
  ok->set_scheme("int8");
  ok->set_job_id("job-c");
  ok->set_state(quark::v1::JOB_STATE_SUCCEEDED);
  ok->set_bits_per_weight(8.0);
  ok->set_size_bytes(3 * 1048576);
  ok->set_ppl(10.5);
  ok->set_kld(0.0125);
  ok->set_seconds(12.25);
  quark::v1::SweepCandidate* dropped = sweep->add_candidates();
  dropped->set_scheme("uint4_wo_128");
  dropped->set_state(quark::v1::JOB_STATE_FAILED);
  dropped->set_error("dropped at submit: group_size 128");
  const std::string table = SweepTable(*sweep);
  EXPECT_EQ(table,
            "float perplexity: 10.0000\n"
            "SCHEME                       STATE        BITS   SIZE_MIB        PPL     dPPL        KLD  SECONDS  JOB\n"
            "int8                         SUCCEEDED   8.000      3.000    10.5000   +5.00%   0.012500     12.2  job-c\n"
            "uint4_wo_128                 FAILED          -          -          -        -          -        -  -  "
            "dropped at submit: group_size 128\n");
  const std::string shown = JobTable(parent);
  EXPECT_NE(shown.find("sweep of int8,uint4_wo_128"), std::string::npos) << shown;
  EXPECT_NE(shown.find(table), std::string::npos) << shown;
  quark::v1::Job child;
  child.set_id("job-c");
  child.set_parent_id("job-p");
  child.mutable_spec()->set_preset("int8");
  EXPECT_NE(JobTable(child).find("parent:    sweep job job-p\n"), std::string::npos) << JobTable(child);
  EXPECT_EQ(JobTable(child).find("SCHEME"), std::string::npos);
}

// #36 item 1: a column per evaluation task (the rows' export scores), the float scores above; #36 item 4: a split
// pass's row names its layers.
TEST(SweepTableOutputTest, TaskColumnsAndSplitPassRows) {
  quark::v1::SweepResult sweep;
  sweep.set_ppl_float(10.0);
  (*sweep.mutable_task_scores_float())["piqa"] = 0.75;
  (*sweep.mutable_task_scores_float())["arc_easy"] = 0.5;
  quark::v1::SweepCandidate* ok = sweep.add_candidates();
  ok->set_scheme("int8");
  ok->set_job_id("job-c");
  ok->set_state(quark::v1::JOB_STATE_SUCCEEDED);
  ok->set_bits_per_weight(8.0);
  ok->set_size_bytes(1048576);
  ok->set_ppl(10.5);
  ok->set_kld(0.0125);
  ok->set_seconds(2);
  (*ok->mutable_task_scores())["piqa"] = 0.625;
  (*ok->mutable_task_scores())["arc_easy"] = 0.25;
  quark::v1::SweepCandidate* part = sweep.add_candidates();
  part->set_scheme("fp8");
  part->set_job_id("job-d");
  part->set_state(quark::v1::JOB_STATE_FAILED);
  part->set_first_layer(2);
  part->set_layer_count(3);
  part->set_error("boom");
  EXPECT_EQ(SweepTable(sweep),
            "float perplexity: 10.0000\n"
            "float task scores:   0.5000   0.7500\n"
            "SCHEME                       STATE        BITS   SIZE_MIB        PPL     dPPL        KLD arc_easy     piqa "
            " SECONDS  JOB\n"
            "int8                         SUCCEEDED   8.000      1.000    10.5000   +5.00%   0.012500   0.2500   0.6250 "
            "     2.0  job-c\n"
            "fp8 [2..4]                   FAILED          -          -          -        -          -        -        - "
            "       -  job-d  boom\n");
}

TEST(AutoFlagTest, CandidatesAndOneBudgetBecomeSpecAutoSearch) {
  SubmitFlags flags;
  flags.model = "file:///m";
  flags.output = "file:///o";
  flags.auto_candidates = {"uint4_wo_128, int8", "fp8"};
  flags.target_bits = 4.5;
  absl::StatusOr<quark::v1::JobSpec> spec = BuildJobSpec(flags);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->auto_search().candidates_size(), 3);
  EXPECT_EQ(spec->auto_search().candidates(1), "int8");
  EXPECT_EQ(spec->auto_search().target_bits(), 4.5);
  // --max-ppl-increase with --auto is the search's budget, not the evaluation's gate.
  flags.target_bits.reset();
  flags.max_ppl_increase = 0.02;
  flags.max_rounds = 3;
  spec = BuildJobSpec(flags);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->auto_search().max_ppl_increase(), 0.02);
  EXPECT_EQ(spec->auto_search().max_rounds(), 3);
  EXPECT_EQ(spec->auto_search().pass_splits(), 0);
  flags.pass_splits = 2;
  spec = BuildJobSpec(flags);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->auto_search().pass_splits(), 2);
  flags.pass_splits.reset();
  EXPECT_FALSE(spec->evaluation().has_max_ppl_increase());
  // Two budgets, none, a scheme beside it, --target-bits alone: refused naming the flag.
  flags.target_bits = 5;
  EXPECT_NE(BuildJobSpec(flags).status().message().find("--auto: give exactly one budget"), std::string::npos);
  flags.target_bits.reset();
  flags.max_ppl_increase.reset();
  EXPECT_NE(BuildJobSpec(flags).status().message().find("--auto: give exactly one budget"), std::string::npos);
  flags.target_bits = 5;
  flags.scheme = "int8";
  EXPECT_NE(BuildJobSpec(flags).status().message().find("--auto: the recipe is searched"), std::string::npos);
  SubmitFlags alone;
  alone.model = "file:///m";
  alone.output = "file:///o";
  alone.scheme = "int8";
  alone.target_bits = 5;
  EXPECT_NE(BuildJobSpec(alone).status().message().find("--target-bits: only with --auto"), std::string::npos);
  alone.target_bits.reset();
  alone.pass_splits = 2;
  EXPECT_NE(BuildJobSpec(alone).status().message().find("--pass-splits: only with --auto"), std::string::npos);
}

TEST(AutoFlagTest, GetPrintsTheRoundsAndTheRecipe) {
  quark::v1::Job parent;
  parent.mutable_spec()->mutable_auto_search()->add_candidates("int8");
  parent.mutable_spec()->mutable_auto_search()->add_candidates("mxfp4_weight_only");
  quark::v1::AutoSearchResult* search = parent.mutable_auto_search();
  search->add_groups()->set_name("model.layers.0.self_attn.qkv");
  search->add_groups()->set_name("model.layers.0.mlp.down_proj");
  search->set_met(true);
  quark::v1::AutoSearchRound* round = search->add_rounds();
  round->set_bits_per_weight(6.125);
  round->set_predicted_kld(0.0123);
  round->set_measured_kld(0.0145);
  round->set_measured_ppl_increase(0.031);
  round->set_job_id("job-r1");
  round->add_choice("int8");
  round->add_choice("mxfp4_weight_only");
  quark::v1::SweepCandidate* pass = parent.mutable_sweep()->add_candidates();
  pass->set_scheme("int8");
  pass->set_state(quark::v1::JOB_STATE_SUCCEEDED);
  pass->set_job_id("job-p1");
  const std::string shown = JobTable(parent);
  EXPECT_NE(shown.find("automatic search over int8,mxfp4_weight_only"), std::string::npos) << shown;
  // A sensitivity pass evaluates nothing: its row shows no perplexity, change or KLD.
  EXPECT_NE(shown.find("int8                         SUCCEEDED       -      0.000          -        -          - "
                       "     0.0  job-p1\n"),
            std::string::npos)
      << shown;
  EXPECT_NE(shown.find("1           6.125     0.012300     0.014500"), std::string::npos) << shown;
  EXPECT_NE(shown.find("+3.10%  job-r1"), std::string::npos) << shown;
  EXPECT_NE(shown.find("budget met; recipe (group: scheme):\n  model.layers.0.self_attn.qkv: int8\n"
                       "  model.layers.0.mlp.down_proj: mxfp4_weight_only\n"),
            std::string::npos)
      << shown;
}

}  // namespace
}  // namespace quark::client
