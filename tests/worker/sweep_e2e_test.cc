// #36 items 1 and 4 through the whole house: `quarkctl submit --sweep` on a real quarkd over loopback gRPC. The
// parent's children are ordinary jobs run by real quark-workers — one from quarkd's local pool and one remote
// worker started here — and the parent's table equals what each child measured; a scheme the model's shapes cannot
// take is dropped with its reason. With sleeping test workers: cancelling the parent stops its running children and
// ends the queued ones, deleting it deletes them, and bad input is refused naming the field.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "client/quarkctl_app.h"
#include "quark/v1/service.grpc.pb.h"
#include "tests/client/run_ctl.h"
#include "tests/storage/support/subprocess.h"
#include "tests/support/require_peer.h"
#include "tests/worker/support/quarkd.h"
#include "tests/worker/support/run_job.h"
#include "tests/worker/support/sweep_e2e_fixture.h"

namespace quark::worker {
namespace {

namespace fs = std::filesystem;
using quark::testing::Subprocess;
using sweep_e2e::Fixtures;
using sweep_e2e::JobIdIn;
using sweep_e2e::SweepE2eTest;

TEST_F(SweepE2eTest, ALocalAndARemoteWorkerRunTheCandidatesAndTheTableIsWhatEachMeasured) {
  const std::string worker = quark::testing::BuiltBinary("worker/quark-worker");
  if (!fs::exists(worker)) QUARK_PEER_MISSING() << "quark-worker (the engine build) not built";
  std::unique_ptr<Subprocess> remote = StartPoolAndRemoteWorker();
  ASSERT_NE(remote, nullptr) << quarkd_->Log();
  // uint4_wo_128's groups do not divide stories260K's 64 input columns, and uint4_wo_per_channel's gate_proj (172
  // channels) cannot have its zero points packed 8 to a word: both are dropped at submit with the reason (no child
  // runs them), and the parent succeeds with the others' results (partial results).
  client::CtlRun run = client::RunCtl({"--server", quarkd_->address(), "submit", "-f", JobFile(), "--sweep",
                                       "w_int8_per_tensor_sym,uint4_wo_128", "--sweep", "fp8,uint4_wo_per_channel",
                                       "--sweep", "mxfp4_weight_only", "--wait"});
  const std::string parent_id = JobIdIn(run.out);
  ASSERT_FALSE(parent_id.empty()) << run.out << run.err << quarkd_->Log();
  EXPECT_EQ(run.code, 0) << run.out << run.err;
  const quark::v1::Job parent = Get(parent_id);
  ASSERT_EQ(parent.state(), quark::v1::JOB_STATE_SUCCEEDED) << parent.DebugString() << quarkd_->Log();
  EXPECT_EQ(parent.error(), "");
  ASSERT_EQ(parent.sweep().candidates_size(), 5);
  const quark::v1::SweepCandidate& dropped = parent.sweep().candidates(1);
  EXPECT_EQ(dropped.scheme(), "uint4_wo_128");
  EXPECT_EQ(dropped.state(), quark::v1::JOB_STATE_FAILED);
  EXPECT_EQ(dropped.job_id(), "");
  EXPECT_NE(dropped.error().find("dropped at submit: spec.preset: the model's shapes do not take uint4_wo_128: "
                                 "global_quant_config.weight.group_size: 128 does not divide in_features 64"),
            std::string::npos)
      << dropped.error();
  const quark::v1::SweepCandidate& packed = parent.sweep().candidates(3);
  EXPECT_EQ(packed.state(), quark::v1::JOB_STATE_FAILED);
  EXPECT_EQ(packed.job_id(), "");
  EXPECT_NE(packed.error().find("dropped at submit: spec.preset: the model's shapes do not take uint4_wo_per_channel: "
                                "hf_quark: model.layers.0.mlp.gate_proj (weight [172, 64]"),
            std::string::npos)
      << packed.error();
  EXPECT_NE(packed.error().find("= 172 is not a multiple of 8"), std::string::npos) << packed.error();
  std::set<std::string> workers;
  for (int i : {0, 2, 4}) {
    const quark::v1::SweepCandidate& row = parent.sweep().candidates(i);
    ASSERT_EQ(row.state(), quark::v1::JOB_STATE_SUCCEEDED) << row.DebugString();
    const quark::v1::Job child = Get(row.job_id());
    EXPECT_EQ(child.parent_id(), parent_id);
    EXPECT_EQ(child.spec().preset(), row.scheme());
    EXPECT_EQ(child.state(), quark::v1::JOB_STATE_SUCCEEDED);
    workers.insert(child.worker_id());
    // The row is the child's own figures, bit for bit.
    const auto& metrics = child.result().metrics();
    EXPECT_EQ(row.ppl(), metrics.at("ppl_reloaded"));
    EXPECT_EQ(row.kld(), metrics.at("kld_mean_reloaded"));
    EXPECT_EQ(parent.sweep().ppl_float(), metrics.at("ppl_before"));
    int64_t bytes = 0;
    for (const auto& artifact : child.result().artifacts()) bytes += artifact.size_bytes();
    EXPECT_EQ(row.size_bytes(), bytes);
    EXPECT_GT(row.size_bytes(), 0);
    EXPECT_GT(row.kld(), 0);
  }
  // int8 and fp8 per tensor: 8 bits and one scale per tensor.
  EXPECT_NEAR(parent.sweep().candidates(0).bits_per_weight(), 8.0, 0.01);
  EXPECT_NEAR(parent.sweep().candidates(2).bits_per_weight(), 8.0, 0.01);
  EXPECT_NEAR(parent.sweep().candidates(4).bits_per_weight(), 4.25, 0.01);  // 4-bit codes, one E8M0 scale per 32
  // The first two of the three children ran at once, one on each worker: the pool's and the remote one.
  EXPECT_EQ(workers.size(), 2u);
  EXPECT_EQ(workers.count("remote-1"), 1u);
  // quarkctl get prints the table.
  client::CtlRun get = client::RunCtl({"--server", quarkd_->address(), "get", parent_id});
  EXPECT_NE(get.out.find("SCHEME"), std::string::npos) << get.out;
  EXPECT_NE(get.out.find("fp8 "), std::string::npos) << get.out;
  EXPECT_NE(get.out.find("dropped at submit"), std::string::npos) << get.out;
  EXPECT_NE(get.out.find("float perplexity: "), std::string::npos) << get.out;
  // #36 item 1: the parent's own manifest holds the same table, each child's manifest named with its digest, and the
  // two candidates dropped at submit with their reasons; quarkctl get says where it is.
  const nlohmann::json manifest = CheckParentManifest(parent);
  ASSERT_TRUE(manifest.is_object());
  EXPECT_EQ(manifest["kind"], "sweep");
  ASSERT_EQ(manifest["failed"].size(), 2u);
  EXPECT_EQ(manifest["failed"][0]["scheme"], "uint4_wo_128");
  EXPECT_EQ(manifest["failed"][1]["error"], packed.error());
  const std::string where = "file://" + (quarkd_->root() / "out" / parent_id / "manifest.json").string();
  EXPECT_NE(get.out.find("table:     " + where), std::string::npos) << get.out;
  remote->Stop(SIGTERM);
}

// #36 item 1: one float evaluation per sweep. The first child to claim the float figures (perplexity, KLD reference
// rows) measures them before it quantizes and stores them by content key beside the artifacts; its siblings, on the
// other worker, read them: the float model is measured once for the three children (counted by the children's
// float_passes metrics and their events). Each row equals what a job measuring the float model itself reports, bit
// for bit. A corrupt entry (malformed JSON, rows of another digest) is refused and measured again, never failing the
// job.
TEST_F(SweepE2eTest, TheChildrenShareOneFloatEvaluationAndACorruptEntryIsMeasuredAgain) {
  const std::string worker = quark::testing::BuiltBinary("worker/quark-worker");
  if (!fs::exists(worker)) QUARK_PEER_MISSING() << "quark-worker (the engine build) not built";
  std::unique_ptr<Subprocess> remote = StartPoolAndRemoteWorker();
  ASSERT_NE(remote, nullptr) << quarkd_->Log();
  quark::v1::SubmitJobRequest request = SweepRequest({"w_int8_per_tensor_sym", "fp8", "mxfp4_weight_only"});
  quark::v1::JobSpec* spec = request.mutable_spec();
  spec->set_max_attempts(1);
  spec->mutable_evaluation()->set_seq_len(128);
  spec->mutable_evaluation()->set_max_windows(2);
  spec->mutable_evaluation()->set_kld(true);
  const quark::v1::Job parent = RunToEnd(request);
  ASSERT_EQ(parent.state(), quark::v1::JOB_STATE_SUCCEEDED) << parent.DebugString() << quarkd_->Log();
  ASSERT_EQ(parent.sweep().candidates_size(), 3);
  double passes = 0;
  int producers = 0;
  int measured = 0;  // "float baseline: ... measured here and stored at ..." events, over the children
  std::string baseline_log;
  std::set<std::string> workers;
  for (const quark::v1::SweepCandidate& row : parent.sweep().candidates()) {
    const quark::v1::Job child = Get(row.job_id());
    ASSERT_EQ(child.state(), quark::v1::JOB_STATE_SUCCEEDED) << child.error();
    workers.insert(child.worker_id());
    const auto& metrics = child.result().metrics();
    ASSERT_EQ(metrics.count("float_passes"), 1u) << child.DebugString();
    passes += metrics.at("float_passes");
    if (metrics.at("float_passes") > 0) {
      ++producers;
      EXPECT_EQ(metrics.at("float_figures_read"), 0);
    } else {
      EXPECT_EQ(metrics.at("float_figures_read"), 2) << "the float perplexity and the KLD reference rows";
      EXPECT_EQ(metrics.at("float_ppl_shared"), 1);
    }
    EXPECT_EQ(parent.sweep().ppl_float(), metrics.at("ppl_before"));
    EXPECT_EQ(row.ppl(), metrics.at("ppl_reloaded"));
    EXPECT_EQ(row.kld(), metrics.at("kld_mean_reloaded"));
    for (const std::string& line : Logs(child.id())) {
      if (line.find("float baseline") != std::string::npos) baseline_log += child.id() + ": " + line + "\n";
      measured += line.find("measured here and stored") != std::string::npos;
    }
  }
  EXPECT_EQ(passes, 2) << "one float perplexity and one KLD reference pass for the whole sweep";
  EXPECT_EQ(producers, 1);
  EXPECT_EQ(measured, 2) << baseline_log;
  EXPECT_EQ(workers.size(), 2u);

  // fp8 alone, forced past deduplication: a job of no sweep measures the float model itself, and its figures are
  // the fp8 row's, bit for bit.
  quark::v1::SubmitJobRequest alone = request;
  alone.mutable_spec()->clear_sweep();
  alone.mutable_spec()->set_preset("fp8");
  alone.mutable_spec()->set_force(true);
  const quark::v1::Job single = RunToEnd(alone);
  ASSERT_EQ(single.state(), quark::v1::JOB_STATE_SUCCEEDED) << single.error();
  EXPECT_EQ(single.result().metrics().count("float_passes"), 0u);
  EXPECT_EQ(single.result().metrics().at("ppl_before"), parent.sweep().ppl_float());
  EXPECT_EQ(single.result().metrics().at("kld_mean_reloaded"), parent.sweep().candidates(1).kld());
  EXPECT_EQ(single.result().metrics().at("ppl_reloaded"), parent.sweep().candidates(1).ppl());

  // Corrupt the stored entry: the perplexity's JSON cut, the rows' bytes changed (same size, another digest).
  const fs::path baselines = quarkd_->root() / "out" / ".quark-float-baselines";
  ASSERT_TRUE(fs::is_directory(baselines));
  std::vector<fs::path> keys;
  for (const auto& entry : fs::directory_iterator(baselines)) keys.push_back(entry.path());
  ASSERT_EQ(keys.size(), 1u) << "one content key for the three children";
  std::ofstream(keys[0] / "ppl.json", std::ios::trunc) << R"({"format": "quark-float-baseline-v1", "key")";
  {
    std::fstream rows(keys[0] / "kld-rows.bin", std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(rows.good());
    rows.seekp(100);
    rows.write("corrupt", 7);
  }
  const quark::v1::Job again = RunToEnd(SweepRequestLike(request, {"int8"}));
  ASSERT_EQ(again.state(), quark::v1::JOB_STATE_SUCCEEDED) << again.DebugString() << quarkd_->Log();
  const quark::v1::Job child = Get(again.sweep().candidates(0).job_id());
  EXPECT_EQ(child.result().metrics().at("float_passes"), 2) << "both refused figures measured again";
  EXPECT_EQ(child.result().metrics().at("ppl_before"), parent.sweep().ppl_float());
  int refused = 0;
  for (const std::string& line : Logs(child.id())) {
    refused += line.find("float baseline: float perplexity refused") != std::string::npos ||
               line.find("float baseline: the stored float KLD reference rows refused (the rows' SHA-256") !=
                   std::string::npos;
  }
  EXPECT_EQ(refused, 2);
  remote->Stop(SIGTERM);
}

// #36 item 3: an automatic search under a size budget. Its sensitivity passes are child jobs spread over the pool
// worker and the remote one; quarkd searches over their figures and a verification child quantizes, exports and
// evaluates the chosen mixed recipe end to end. A second search over the same candidates reuses the passes (their
// content keys) and only verifies; a size or loss budget no candidate reaches and bad fields are refused at submit.
TEST_F(SweepE2eTest, AnAutomaticSearchRunsItsPassesAsChildrenAndVerifiesTheRecipeItChose) {
  const std::string worker = quark::testing::BuiltBinary("worker/quark-worker");
  if (!fs::exists(worker)) QUARK_PEER_MISSING() << "quark-worker (the engine build) not built";
  std::unique_ptr<Subprocess> remote = StartPoolAndRemoteWorker();
  ASSERT_NE(remote, nullptr) << quarkd_->Log();
  quark::v1::SubmitJobRequest request = SweepRequest({});
  quark::v1::JobSpec* spec = request.mutable_spec();
  spec->set_max_attempts(1);
  spec->mutable_evaluation()->set_seq_len(128);
  spec->mutable_evaluation()->set_max_windows(2);
  spec->mutable_evaluation()->set_kld(true);
  spec->mutable_calibration()->set_num_samples(4);
  spec->mutable_calibration()->set_seq_len(64);
  for (const char* c : {"w_int8_per_tensor_sym", "mxfp4_weight_only"}) spec->mutable_auto_search()->add_candidates(c);
  spec->mutable_auto_search()->set_target_bits(6.0);
  auto run = [&](const quark::v1::SubmitJobRequest& r) { return RunToEnd(r); };
  const quark::v1::Job parent = run(request);
  ASSERT_EQ(parent.state(), quark::v1::JOB_STATE_SUCCEEDED) << parent.DebugString() << quarkd_->Log();
  const quark::v1::AutoSearchResult& found = parent.auto_search();
  // stories260K: 5 layers x (qkv, o_proj, gate_up, down_proj).
  ASSERT_EQ(found.groups_size(), 20);
  EXPECT_EQ(found.groups(0).name(), "model.layers.0.self_attn.qkv");
  EXPECT_EQ(found.groups(0).modules_size(), 3);
  ASSERT_EQ(found.rounds_size(), 1);  // a size budget is met by construction: one verification
  EXPECT_TRUE(found.met());
  const quark::v1::AutoSearchRound& round = found.rounds(0);
  EXPECT_LE(round.bits_per_weight(), 6.0);
  EXPECT_GT(round.bits_per_weight(), found.smallest_bits());
  EXPECT_NEAR(found.largest_bits(), 8.0, 0.01);
  // Rows: one pass per candidate, then the round. Each pass ran as a child with its figures per group.
  ASSERT_EQ(parent.sweep().candidates_size(), 3);
  std::set<std::string> workers;
  std::set<std::string> chosen(round.choice().begin(), round.choice().end());
  EXPECT_EQ(chosen.size(), 2u) << "a 6-bit budget between 4.25 and 8 mixes both candidates";
  double predicted = 0;
  for (int c = 0; c < 2; ++c) {
    const quark::v1::SweepCandidate& row = parent.sweep().candidates(c);
    ASSERT_EQ(row.state(), quark::v1::JOB_STATE_SUCCEEDED) << row.DebugString();
    const quark::v1::Job pass = Get(row.job_id());
    EXPECT_EQ(pass.parent_id(), parent.id());
    EXPECT_TRUE(pass.spec().sensitivity_pass());
    EXPECT_EQ(pass.spec().preset(), row.scheme());
    workers.insert(pass.worker_id());
    for (int g = 0; g < found.groups_size(); ++g) {
      ASSERT_EQ(pass.result().metrics().count("kld:" + found.groups(g).name()), 1u) << found.groups(g).name();
      if (round.choice(g) == row.scheme()) predicted += pass.result().metrics().at("kld:" + found.groups(g).name());
    }
  }
  // Leased like any job by whichever worker was free (a pass of stories260K takes a fraction of a second, so one
  // worker may take both: the sweep test above shows the spread over two).
  EXPECT_EQ(workers.count(""), 0u);
  EXPECT_DOUBLE_EQ(round.predicted_kld(), predicted);  // the sum of the chosen groups' measured KLD
  // The round's child quantized exactly the recipe: the mixed Config, verified end to end (export read back).
  const quark::v1::SweepCandidate& verified = parent.sweep().candidates(2);
  EXPECT_EQ(verified.scheme(), "round 1");
  EXPECT_EQ(verified.job_id(), round.job_id());
  const quark::v1::Job child = Get(round.job_id());
  ASSERT_EQ(child.state(), quark::v1::JOB_STATE_SUCCEEDED) << child.error();
  EXPECT_TRUE(child.spec().has_config());
  EXPECT_GT(child.spec().config().layer_quant_config_size(), 0);
  EXPECT_EQ(round.measured_kld(), child.result().metrics().at("kld_mean_reloaded"));
  EXPECT_GT(round.measured_kld(), 0);
  EXPECT_EQ(parent.result().artifacts_size(), child.result().artifacts_size());
  EXPECT_EQ(parent.result().metrics().at("bits_per_weight"), round.bits_per_weight());
  EXPECT_NE(found.recipe_json().find("layer_quant_config"), std::string::npos);
  // #36 item 1: the search's own manifest: the pass rows and the round (each child's manifest named with its
  // digest), the recipe as Quark's quantization_config, predicted vs measured loss.
  const nlohmann::json manifest = CheckParentManifest(parent);
  ASSERT_TRUE(manifest.is_object());
  EXPECT_EQ(manifest["kind"], "auto_search");
  EXPECT_EQ(manifest["table"][0]["role"], "pass");
  EXPECT_EQ(manifest["table"][1]["role"], "pass");
  EXPECT_EQ(manifest["table"][2]["role"], "round");
  const nlohmann::json& answer = manifest["auto_search"]["answer"];
  EXPECT_EQ(manifest["auto_search"]["recipe"], nlohmann::json::parse(found.recipe_json()));
  EXPECT_EQ(answer["job_id"], round.job_id());
  EXPECT_EQ(answer["bits_per_weight"].get<double>(), round.bits_per_weight());
  EXPECT_EQ(answer["predicted_kld"].get<double>(), round.predicted_kld());
  EXPECT_EQ(answer["measured_kld"].get<double>(), round.measured_kld());
  EXPECT_EQ(manifest["auto_search"]["met"], true);

  // The same search again: the passes are reused by content key (deduplicated), only the verification runs.
  request.mutable_spec()->mutable_auto_search()->set_target_bits(7.0);
  const quark::v1::Job again = run(request);
  ASSERT_EQ(again.state(), quark::v1::JOB_STATE_SUCCEEDED) << again.DebugString();
  for (int c = 0; c < 2; ++c) {
    EXPECT_EQ(Get(again.sweep().candidates(c).job_id()).deduplicated_from(), parent.sweep().candidates(c).job_id());
  }
  EXPECT_LE(again.auto_search().rounds(0).bits_per_weight(), 7.0);
  EXPECT_GT(again.auto_search().rounds(0).bits_per_weight(), round.bits_per_weight());
  CheckParentManifest(again);  // its pass rows name the reused passes' manifests

  // Bad input names the field; a budget below every recipe names the smallest size.
  quark::v1::SubmitJobRequest small = request;
  small.mutable_spec()->mutable_auto_search()->set_target_bits(3.0);
  const std::string below = Refusal(small);
  EXPECT_NE(below.find("spec.auto_search.target_bits: 3 bits per weight is below 4.2"), std::string::npos) << below;
  // A loss budget below every recipe the stored passes allow: refused at submit (no child runs), naming the smallest
  // predicted loss and the passes it comes from.
  quark::v1::SubmitJobRequest tight = request;
  tight.mutable_spec()->mutable_auto_search()->set_max_kld(1e-9);
  const std::string unreachable = Refusal(tight);
  for (const std::string& part :
       {std::string("spec.auto_search.max_kld: 1e-09 is below "),
        std::string("the smallest predicted loss the candidates"),
        "from the sensitivity passes already run: " + parent.sweep().candidates(0).job_id(),
        parent.sweep().candidates(1).job_id()}) {
    EXPECT_NE(unreachable.find(part), std::string::npos) << part << " in " << unreachable;
  }
  quark::v1::SubmitJobRequest unknown = request;
  unknown.mutable_spec()->mutable_auto_search()->add_candidates("int9");
  EXPECT_NE(Refusal(unknown).find("spec.auto_search.candidates[2]"), std::string::npos);
  quark::v1::SubmitJobRequest no_budget = request;
  no_budget.mutable_spec()->mutable_auto_search()->clear_budget();
  EXPECT_NE(Refusal(no_budget).find("spec.auto_search: give one budget"), std::string::npos);
  quark::v1::SubmitJobRequest pass_by_hand = request;
  pass_by_hand.mutable_spec()->clear_auto_search();
  pass_by_hand.mutable_spec()->set_preset("fp8");
  pass_by_hand.mutable_spec()->set_sensitivity_pass(true);
  EXPECT_NE(Refusal(pass_by_hand).find("spec.sensitivity_pass"), std::string::npos);
  remote->Stop(SIGTERM);
}

TEST_F(SweepE2eTest, CancelAndDeleteReachTheChildrenAndBadInputNamesTheField) {
  Start(2, "sleep:60", "tests/worker/quark-test-worker");
  quark::v1::Job parent;
  ASSERT_TRUE(Submit(SweepRequest({"w_int8_per_tensor_sym", "int8", "fp8"}), &parent).ok());
  ASSERT_EQ(parent.state(), quark::v1::JOB_STATE_RUNNING);
  auto running = [&] {
    int n = 0;
    const quark::v1::Job now = Get(parent.id());
    for (const auto& row : now.sweep().candidates()) {
      n += Get(row.job_id()).state() == quark::v1::JOB_STATE_RUNNING;
    }
    return n;
  };
  ASSERT_TRUE(quark::testing::WaitUntil([&] { return running() == 2; }, std::chrono::seconds(60))) << quarkd_->Log();
  client::CtlRun cancel = client::RunCtl({"--server", quarkd_->address(), "cancel", parent.id()});
  EXPECT_EQ(cancel.code, 0) << cancel.out << cancel.err;
  ASSERT_TRUE(quark::testing::WaitUntil([&] { return Get(parent.id()).state() == quark::v1::JOB_STATE_CANCELLED; },
                                        std::chrono::seconds(60)))
      << Get(parent.id()).DebugString() << quarkd_->Log();
  const quark::v1::Job cancelled = Get(parent.id());
  for (const auto& row : cancelled.sweep().candidates()) {
    EXPECT_EQ(row.state(), quark::v1::JOB_STATE_CANCELLED) << row.DebugString();
    EXPECT_EQ(Get(row.job_id()).state(), quark::v1::JOB_STATE_CANCELLED);
  }
  // Deleting the parent deletes its children; the files in the output prefix stay, as DeleteJob leaves any job's
  // artifacts (api.md): the cancelled parent's manifest too.
  const std::string manifest_path = (quarkd_->root() / "out" / parent.id() / "manifest.json").string();
  const std::string manifest = ReadAll(manifest_path);
  EXPECT_FALSE(manifest.empty()) << manifest_path;
  quark::v1::DeleteJobRequest del;
  del.set_id(parent.id());
  quark::v1::DeleteJobResponse deleted;
  grpc::ClientContext delete_context;
  ASSERT_TRUE(stub_->DeleteJob(&delete_context, del, &deleted).ok());
  EXPECT_EQ(ReadAll(manifest_path), manifest) << "DeleteJob touched the parent's manifest";
  for (const auto& row : cancelled.sweep().candidates()) {
    grpc::ClientContext context;
    quark::v1::GetJobRequest get;
    get.set_id(row.job_id());
    quark::v1::Job gone;
    EXPECT_EQ(stub_->GetJob(&context, get, &gone).error_code(), grpc::StatusCode::NOT_FOUND);
  }

  // Bad input: each refusal names its field.
  EXPECT_NE(Refusal(SweepRequest({"int8", "int9"})).find("spec.sweep[1]"), std::string::npos);
  EXPECT_NE(Refusal(SweepRequest({"int8", "int8"})).find("spec.sweep[1]"), std::string::npos);
  EXPECT_NE(Refusal(SweepRequest({"int8", ""})).find("spec.sweep[1]"), std::string::npos);
  quark::v1::SubmitJobRequest with_preset = SweepRequest({"int8"});
  with_preset.mutable_spec()->set_preset("fp8");
  EXPECT_NE(Refusal(with_preset).find("spec.preset"), std::string::npos);
  quark::v1::SubmitJobRequest no_eval = SweepRequest({"int8"});
  no_eval.mutable_spec()->clear_evaluation();
  EXPECT_NE(Refusal(no_eval).find("spec.evaluation.uri"), std::string::npos);
  quark::v1::SubmitJobRequest bad_model = SweepRequest({"int8", "fp8"});
  bad_model.mutable_spec()->set_model_uri("http://example.com/m");
  EXPECT_NE(Refusal(bad_model).find("model_uri"), std::string::npos);
  // Every candidate dropped for the model's shapes: refused, each reason named.
  const std::string none = Refusal(SweepRequest({"uint4_wo_128", "int4_wo_128"}));
  EXPECT_NE(none.find("spec.sweep: no candidate can run on this model: uint4_wo_128: "), std::string::npos) << none;
  EXPECT_NE(none.find("; int4_wo_128: "), std::string::npos) << none;
  // quarkctl refuses --sweep beside --scheme before calling quarkd.
  client::CtlRun both = client::RunCtl({"--server", quarkd_->address(), "submit", "--model", "file:///m", "--output",
                                        "file:///o", "--scheme", "int8", "--sweep", "fp8"});
  EXPECT_NE(both.code, 0);
  EXPECT_NE(both.err.find("--sweep"), std::string::npos) << both.err;
}

}  // namespace
}  // namespace quark::worker
