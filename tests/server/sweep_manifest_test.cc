// #36 item 1: a sweep parent's own manifest (server/scheduler/sweep_manifest.h). The document's rows, failed
// children and digests; the writer on a real file:// store (confined, atomic, rewritten equal) and on a real s3rver;
// and JobScheduler writing it as the parent ends, also when the parent ends after a restart.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/synchronization/notification.h"
#include "core/base/digest.h"
#include "core/base/ed25519.h"
#include "server/api/sweep_manifest_store.h"
#include "server/scheduler/sweep_manifest.h"
#include "tests/server/scheduler_fixture.h"
#include "tests/storage/support/s3_test_base.h"
#include "worker/storage/file_object_store.h"
#include "worker/storage/manifest_signature.h"
#include "worker/storage/publish.h"

namespace quark::server {
namespace {

using nlohmann::json;
using quark::v1::Job;
using quark::v1::JobState;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

google::protobuf::Timestamp At(int64_t seconds) {
  google::protobuf::Timestamp t;
  t.set_seconds(seconds);
  return t;
}

// A parent whose table has a succeeded child, a failed child and a candidate dropped at submit; and its two children.
struct Sweep {
  Job parent;
  std::vector<Job> children;
};

Sweep EndedSweep(const std::string& output_uri) {
  Sweep s;
  Job& parent = s.parent;
  parent.set_id("job-parent");
  parent.set_state(JobState::JOB_STATE_SUCCEEDED);
  parent.set_tenant("acme");
  parent.mutable_spec()->set_model_uri("file:///models/tiny");
  parent.mutable_spec()->set_output_uri(output_uri);
  for (const char* scheme : {"int8", "fp8", "uint4_wo_128"}) parent.mutable_spec()->add_sweep(scheme);
  *parent.mutable_created_at() = At(1000);
  quark::v1::SweepResult* table = parent.mutable_sweep();
  table->set_ppl_float(10.25);
  (*table->mutable_task_scores_float())["arc_easy"] = 0.5;
  quark::v1::SweepCandidate* ok = table->add_candidates();
  ok->set_scheme("int8");
  ok->set_job_id("job-a");
  ok->set_state(JobState::JOB_STATE_SUCCEEDED);
  ok->set_size_bytes(2000);
  ok->set_bits_per_weight(8.0);
  ok->set_ppl(10.3125);
  ok->set_kld(0.0021);
  ok->set_seconds(3.5);
  (*ok->mutable_task_scores())["arc_easy"] = 0.46875;
  quark::v1::SweepCandidate* bad = table->add_candidates();
  bad->set_scheme("fp8");
  bad->set_job_id("job-b");
  bad->set_state(JobState::JOB_STATE_FAILED);
  bad->set_error("INTERNAL: out of memory");
  quark::v1::SweepCandidate* dropped = table->add_candidates();
  dropped->set_scheme("uint4_wo_128");
  dropped->set_state(JobState::JOB_STATE_FAILED);
  dropped->set_error("dropped at submit: 128 does not divide in_features 64");
  (*parent.mutable_result()->mutable_metrics())["ppl:int8"] = 10.3125;

  Job a;
  a.set_id("job-a");
  a.set_state(JobState::JOB_STATE_SUCCEEDED);
  a.set_deduplicated_from("job-earlier");
  a.mutable_result()->set_manifest_uri(output_uri + "/job-earlier/attempt-1/manifest.json");
  a.mutable_result()->set_manifest_sha256(std::string(64, 'a'));
  *a.mutable_finished_at() = At(2000);
  Job b;
  b.set_id("job-b");
  b.set_state(JobState::JOB_STATE_FAILED);
  *b.mutable_finished_at() = At(3000);  // the last to end: the manifest's created_at
  s.children = {b, a};
  return s;
}

TEST(SweepManifestTest, RowsFailedChildrenAndDigests) {
  const Sweep s = EndedSweep("file:///out");
  const json doc = BuildSweepManifest(s.parent, s.children);
  EXPECT_EQ(doc["format_version"], 1);
  EXPECT_EQ(doc["kind"], "sweep");
  EXPECT_EQ(doc["job_id"], "job-parent");
  EXPECT_EQ(doc["created_at"], "1970-01-01T00:50:00Z");  // job-b's end, not the time of writing
  EXPECT_EQ(doc["state"], "JOB_STATE_SUCCEEDED");
  EXPECT_EQ(doc["tenant"], "acme");
  EXPECT_EQ(doc["spec_sha256"], Sha256Hex(doc["spec"].dump()));
  EXPECT_EQ(doc["spec"]["sweep"], json({"int8", "fp8", "uint4_wo_128"}));
  EXPECT_EQ(doc["files"], json::array());
  EXPECT_EQ(doc["metrics"]["ppl:int8"], 10.3125);
  EXPECT_EQ(doc["float"]["ppl"], 10.25);
  EXPECT_EQ(doc["float"]["task_scores"]["arc_easy"], 0.5);
  ASSERT_EQ(doc["table"].size(), 3u);
  const json& row = doc["table"][0];
  EXPECT_EQ(row["scheme"], "int8");
  EXPECT_EQ(row["role"], "candidate");
  EXPECT_EQ(row["job_id"], "job-a");
  EXPECT_EQ(row["state"], "JOB_STATE_SUCCEEDED");
  EXPECT_EQ(row["size_bytes"], 2000);
  EXPECT_EQ(row["bits_per_weight"], 8.0);
  EXPECT_EQ(row["ppl"].get<double>(), 10.3125);
  EXPECT_EQ(row["kld"].get<double>(), 0.0021);  // bit for bit after the text round trip
  EXPECT_EQ(row["seconds"], 3.5);
  EXPECT_EQ(row["task_scores"]["arc_easy"], 0.46875);
  EXPECT_EQ(row["deduplicated_from"], "job-earlier");
  EXPECT_EQ(row["manifest_uri"], "file:///out/job-earlier/attempt-1/manifest.json");
  EXPECT_EQ(row["manifest_sha256"], std::string(64, 'a'));
  EXPECT_FALSE(row.contains("error"));
  EXPECT_EQ(doc["table"][1]["error"], "INTERNAL: out of memory");
  EXPECT_FALSE(doc["table"][1].contains("manifest_uri"));
  EXPECT_EQ(doc["table"][2]["job_id"], "");
  ASSERT_EQ(doc["failed"].size(), 2u);
  EXPECT_EQ(doc["failed"][0], json({{"scheme", "fp8"}, {"job_id", "job-b"}, {"state", "JOB_STATE_FAILED"},
                                    {"error", "INTERNAL: out of memory"}}));
  EXPECT_EQ(doc["failed"][1]["scheme"], "uint4_wo_128");
  EXPECT_EQ(doc["failed"][1]["error"], "dropped at submit: 128 does not divide in_features 64");
  EXPECT_FALSE(doc.contains("auto_search"));
}

TEST(SweepManifestTest, ASearchHasItsRecipeRoundsAndPassRows) {
  Sweep s = EndedSweep("file:///out");
  Job& parent = s.parent;
  parent.mutable_spec()->clear_sweep();
  parent.mutable_spec()->mutable_auto_search()->add_candidates("int8");
  parent.mutable_spec()->mutable_auto_search()->add_candidates("fp8");
  parent.mutable_spec()->mutable_auto_search()->set_target_bits(6.0);
  quark::v1::AutoSearchResult* search = parent.mutable_auto_search();
  search->set_pass_rows(2);
  search->set_met(true);
  search->set_recipe_json(R"({"layer_quant_config": {"model.layers.0.*": {"weight": {"dtype": "int8"}}}})");
  quark::v1::AutoSearchRound* round = search->add_rounds();
  round->set_job_id("job-r1");
  round->set_bits_per_weight(5.5);
  round->set_predicted_kld(0.004);
  round->set_measured_kld(0.0045);
  const json doc = BuildSweepManifest(parent, s.children);
  EXPECT_EQ(doc["kind"], "auto_search");
  EXPECT_EQ(doc["table"][0]["role"], "pass");
  EXPECT_EQ(doc["table"][1]["role"], "pass");
  EXPECT_EQ(doc["table"][2]["role"], "round");
  const json& found = doc["auto_search"];
  EXPECT_EQ(found["recipe"]["layer_quant_config"]["model.layers.0.*"]["weight"]["dtype"], "int8");
  EXPECT_FALSE(found.contains("recipe_json"));
  EXPECT_EQ(found["met"], true);
  EXPECT_EQ(found["pass_rows"], 2);
  EXPECT_EQ(found["answer"]["job_id"], "job-r1");
  EXPECT_EQ(found["answer"]["predicted_kld"], 0.004);
  EXPECT_EQ(found["answer"]["measured_kld"], 0.0045);
  EXPECT_EQ(found["rounds"][0]["bits_per_weight"], 5.5);
}

TEST(SweepManifestTest, WrittenWholeInsideTheRootsAndRewrittenEqual) {
  testing::TempDir root;
  const std::string out = "file://" + root.path() + "/out";
  SweepManifestWriter writer(MakeParentStoreFor({root.path()}, std::nullopt, nullptr), nullptr);
  const Sweep s = EndedSweep(out);
  absl::StatusOr<WrittenManifest> written = writer.Write(s.parent, s.children);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(written->uri, out + "/job-parent/manifest.json");
  EXPECT_EQ(written->uri, storage::SweepManifestUri(out, "job-parent"));
  const std::string bytes = ReadFile(root.path() + "/out/job-parent/manifest.json");
  EXPECT_EQ(written->sha256, Sha256Hex(bytes));
  EXPECT_EQ(json::parse(bytes), BuildSweepManifest(s.parent, s.children));
  // No temp file left beside it: the store wrote through a temp name and renamed it into place.
  int entries = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(root.path() + "/out/job-parent")) {
    ++entries;
  }
  EXPECT_EQ(entries, 1);
  // quarkd restarted before it stored the parent's end: the same parent and children write the same bytes.
  absl::StatusOr<WrittenManifest> again = writer.Write(s.parent, s.children);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->sha256, written->sha256);
  EXPECT_EQ(ReadFile(root.path() + "/out/job-parent/manifest.json"), bytes);

  // Never outside the parent's output folder, nor outside the roots.
  Sweep escape = EndedSweep(out);
  escape.parent.set_id("../job-other");
  absl::StatusOr<WrittenManifest> refused = writer.Write(escape.parent, escape.children);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(refused.status().message().find("spec.output_uri"), std::string::npos) << refused.status();
  testing::TempDir elsewhere;
  const Sweep outside = EndedSweep("file://" + elsewhere.path() + "/out");
  refused = writer.Write(outside.parent, outside.children);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied) << refused.status();
  EXPECT_FALSE(std::filesystem::exists(elsewhere.path() + "/out/job-parent/manifest.json"));
}

TEST(SweepManifestTest, SignedAsTheWorkersSignTheirsAndVerified) {
  testing::TempDir root;
  const std::string pem = root.File("key.pem");
  ASSERT_EQ(std::system(("openssl genpkey -algorithm ed25519 -out " + pem + " 2>/dev/null").c_str()), 0);
  absl::StatusOr<std::unique_ptr<Ed25519Signer>> signer = Ed25519Signer::FromPemFile(pem);
  ASSERT_TRUE(signer.ok()) << signer.status();
  const Ed25519PublicKey key = (*signer)->public_key();
  SweepManifestWriter writer(MakeParentStoreFor({root.path()}, std::nullopt, nullptr), *std::move(signer));
  const Sweep s = EndedSweep("file://" + root.path() + "/out");
  absl::StatusOr<WrittenManifest> written = writer.Write(s.parent, s.children);
  ASSERT_TRUE(written.ok()) << written.status();
  storage::FileObjectStore store({root.path()});
  absl::StatusOr<storage::ManifestCheck> check = storage::VerifyManifest(store, written->uri, {key});
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_TRUE(check->ok()) << check->problems.front();
  EXPECT_FALSE(check->key_id.empty());
  // Ed25519 is deterministic: signed, the rewrite is still the same bytes.
  absl::StatusOr<WrittenManifest> again = writer.Write(s.parent, s.children);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->sha256, written->sha256);
}

class SweepManifestS3Test : public quark::testing::S3TestBase {};

TEST_F(SweepManifestS3Test, WrittenToTheBucketUnderTheOutputUri) {
  SweepManifestWriter writer(MakeParentStoreFor({}, server_->Config(), nullptr), nullptr);
  const Sweep s = EndedSweep("s3://test/sweeps");
  absl::StatusOr<WrittenManifest> written = writer.Write(s.parent, s.children);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(written->uri, "s3://test/sweeps/job-parent/manifest.json");
  storage::S3Config config = server_->Config();
  absl::StatusOr<std::shared_ptr<storage::ObjectStore>> store =
      MakeParentStoreFor({}, config, nullptr)(s.parent);
  ASSERT_TRUE(store.ok());
  absl::StatusOr<std::string> bytes = (*store)->GetBytes(written->uri);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(Sha256Hex(*bytes), written->sha256);
  EXPECT_EQ(json::parse(*bytes)["table"][0]["ppl"].get<double>(), 10.3125);
}

// JobScheduler over SQLite: the parent's manifest is written as it ends, with the event naming it and its digest.
class SweepManifestSchedulerTest : public testing::SchedulerFixture {
 protected:
  SweepManifestSchedulerTest() : SchedulerFixture(WithWriter(this)) {}

  static SchedulerOptions WithWriter(SweepManifestSchedulerTest* self) {
    SchedulerOptions options = ShortOptions();
    // The root is read at each write: the fixture's folder exists by then.
    options.sweep_manifests = std::make_shared<const SweepManifestWriter>(
        [self](const Job& parent) -> absl::StatusOr<std::shared_ptr<storage::ObjectStore>> {
          absl::StatusOr<std::shared_ptr<storage::ObjectStore>> store =
              MakeParentStoreFor({self->root_.path()}, std::nullopt, nullptr)(parent);
          if (!store.ok() || !self->hang_writes_) return store;
          return std::shared_ptr<storage::ObjectStore>(std::make_shared<HangingStore>(*store, &self->hang_));
        },
        nullptr);
    return options;
  }

  // A store whose PutBytes hangs until released, as an s3 endpoint that is down holds a PUT through its retries.
  struct Hang {
    absl::Notification entered;
    absl::Notification released;
  };
  class HangingStore : public storage::ObjectStore {
   public:
    HangingStore(std::shared_ptr<storage::ObjectStore> base, Hang* hang) : base_(std::move(base)), hang_(hang) {}
    absl::Status PutBytes(std::string_view uri, std::string_view bytes) override {
      hang_->entered.Notify();
      hang_->released.WaitForNotification();
      return base_->PutBytes(uri, bytes);
    }
    absl::Status PutFile(std::string_view uri, const std::filesystem::path& file) override {
      return base_->PutFile(uri, file);
    }
    absl::StatusOr<std::string> GetBytes(std::string_view uri) override { return base_->GetBytes(uri); }
    absl::Status GetFile(std::string_view uri, const std::filesystem::path& file) override {
      return base_->GetFile(uri, file);
    }
    absl::StatusOr<storage::ObjectInfo> Head(std::string_view uri) override { return base_->Head(uri); }
    absl::StatusOr<std::vector<storage::ObjectInfo>> List(std::string_view prefix_uri) override {
      return base_->List(prefix_uri);
    }
    absl::Status Delete(std::string_view uri) override { return base_->Delete(uri); }

   private:
    std::shared_ptr<storage::ObjectStore> base_;
    Hang* hang_;
  };

  std::string Output() const { return "file://" + root_.path() + "/out"; }

  absl::StatusOr<Job> SubmitSweep(const std::vector<std::string>& schemes) {
    quark::v1::JobSpec spec;
    spec.set_model_uri("file:///m");
    spec.set_output_uri(Output());
    SweepPlan plan;
    for (int i = 0; i < static_cast<int>(schemes.size()); ++i) {
      spec.add_sweep(schemes[i]);
      plan.table.add_candidates()->set_scheme(schemes[i]);
      SweepChild child{i, spec, {}};
      child.spec.clear_sweep();
      child.spec.set_preset(schemes[i]);
      plan.children.push_back(std::move(child));
    }
    for (SweepChild& child : plan.children) child.spec.clear_sweep();
    return scheduler_->SubmitSweep("", spec, {}, plan);
  }

  void Register(const std::string& worker_id, int slots) {
    quark::v1::internal::RegisterRequest request;
    request.set_worker_id(worker_id);
    request.set_slots(slots);
    request.add_devices("cpu");
    scheduler_->Register(request);
  }

  void Complete(const quark::v1::internal::LeaseResponse& lease, bool success, double ppl) {
    quark::v1::internal::CompleteRequest done;
    done.set_lease_id(lease.lease_id());
    done.set_success(success);
    if (!success) done.set_error("INTERNAL: the export failed");
    const std::string folder = Output() + "/" + lease.job().id() + "/attempt-" +
                               std::to_string(lease.job().attempts_size());
    if (success) {
      quark::v1::JobResult* result = done.mutable_result();
      quark::v1::Artifact* artifact = result->add_artifacts();
      artifact->set_uri(folder + "/model.safetensors");
      artifact->set_size_bytes(1000);
      result->set_manifest_uri(folder + "/manifest.json");
      result->set_manifest_sha256(Sha256Hex(lease.job().id()));
      (*result->mutable_metrics())["ppl_before"] = 10.0;
      (*result->mutable_metrics())["ppl_reloaded"] = ppl;
    }
    ASSERT_TRUE(scheduler_->Complete(done).ok());
  }

  std::vector<std::string> Logs(const std::string& id) {
    std::vector<std::string> logs;
    absl::StatusOr<std::vector<quark::v1::JobEvent>> events = store_->ListEvents(id, 0, 1000);
    EXPECT_TRUE(events.ok()) << events.status();
    if (!events.ok()) return logs;
    for (const quark::v1::JobEvent& event : *events) {
      if (event.event_case() == quark::v1::JobEvent::kLog) logs.push_back(event.log());
    }
    return logs;
  }

  testing::TempDir root_;
  std::atomic<bool> hang_writes_{false};
  Hang hang_;
};

TEST_F(SweepManifestSchedulerTest, TheParentsManifestIsWrittenAsItEndsAlsoAfterARestart) {
  absl::StatusOr<Job> parent = SubmitSweep({"int8", "fp8"});
  ASSERT_TRUE(parent.ok()) << parent.status();
  Register("w", 2);
  std::optional<quark::v1::internal::LeaseResponse> a = LeaseNow("w");
  std::optional<quark::v1::internal::LeaseResponse> b = LeaseNow("w");
  ASSERT_TRUE(a && b);
  const std::string path = root_.path() + "/out/" + parent->id() + "/manifest.json";
  Complete(*a, true, 10.5);
  EXPECT_FALSE(std::filesystem::exists(path)) << "written only when the parent ends";
  Open();  // quarkd restarts; b is requeued and the parent ends with it
  Register("w2", 1);
  std::optional<quark::v1::internal::LeaseResponse> again = LeaseNow("w2");
  ASSERT_TRUE(again.has_value());
  Complete(*again, false, 0);

  const Job done = *store_->GetJob(parent->id());
  ASSERT_EQ(done.state(), JobState::JOB_STATE_SUCCEEDED) << done.DebugString();
  const std::string bytes = ReadFile(path);
  ASSERT_FALSE(bytes.empty()) << path;
  const json doc = json::parse(bytes);
  EXPECT_EQ(doc["job_id"], parent->id());
  EXPECT_EQ(doc["state"], "JOB_STATE_SUCCEEDED");
  ASSERT_EQ(doc["table"].size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const quark::v1::SweepCandidate& row = done.sweep().candidates(i);
    const json& written = doc["table"][i];
    EXPECT_EQ(written["scheme"], row.scheme());
    EXPECT_EQ(written["job_id"], row.job_id());
    EXPECT_EQ(written["state"], JobState_Name(row.state()));
    EXPECT_EQ(written["ppl"].get<double>(), row.ppl());
    EXPECT_EQ(written["size_bytes"], row.size_bytes());
    const Job child = *store_->GetJob(row.job_id());
    if (row.state() == JobState::JOB_STATE_SUCCEEDED) {
      EXPECT_EQ(written["manifest_uri"], child.result().manifest_uri());
      EXPECT_EQ(written["manifest_sha256"], child.result().manifest_sha256());
    }
  }
  EXPECT_EQ(doc["metrics"]["ppl:int8"], 10.5);
  ASSERT_EQ(doc["failed"].size(), 1u);
  EXPECT_EQ(doc["failed"][0]["scheme"], "fp8");
  EXPECT_NE(doc["failed"][0]["error"].get<std::string>().find("the export failed"), std::string::npos);
  // The parent's log names the file and the SHA-256 of its bytes, just before its end.
  const std::string expected = "manifest: " + storage::SweepManifestUri(Output(), parent->id()) + " (sha256 " +
                               Sha256Hex(bytes) + ")";
  const std::vector<std::string> logs = Logs(parent->id());
  EXPECT_NE(std::find(logs.begin(), logs.end(), expected), logs.end())
      << expected << " in " << ::testing::PrintToString(logs);
  // Written again from what is stored (a restart between writing it and storing the end): the same bytes.
  std::vector<Job> children;
  for (const auto& row : done.sweep().candidates()) children.push_back(*store_->GetJob(row.job_id()));
  absl::StatusOr<WrittenManifest> rewritten = options_.sweep_manifests->Write(done, children);
  ASSERT_TRUE(rewritten.ok()) << rewritten.status();
  EXPECT_EQ(rewritten->sha256, Sha256Hex(bytes));
}

TEST_F(SweepManifestSchedulerTest, AManifestThatCannotBeWrittenIsNamedInTheLogAndTheParentStillEnds) {
  std::filesystem::create_directories(root_.path() + "/out");
  absl::StatusOr<Job> parent = SubmitSweep({"int8"});
  ASSERT_TRUE(parent.ok()) << parent.status();
  // A file where the parent's folder would be: the write fails, the parent's end does not.
  std::ofstream(root_.path() + "/out/" + parent->id()) << "in the way";
  Register("w", 1);
  std::optional<quark::v1::internal::LeaseResponse> a = LeaseNow("w");
  ASSERT_TRUE(a.has_value());
  Complete(*a, true, 10.5);
  EXPECT_EQ(store_->GetJob(parent->id())->state(), JobState::JOB_STATE_SUCCEEDED);
  bool named = false;
  for (const std::string& log : Logs(parent->id())) named |= log.rfind("manifest not written: ", 0) == 0;
  EXPECT_TRUE(named) << ::testing::PrintToString(Logs(parent->id()));
}

}  // namespace
}  // namespace quark::server

namespace quark::server {
namespace {

// The parent's manifest is written without the scheduler's lock: while its store hangs (an s3 endpoint that is down,
// retried), another job is submitted, leased and completed and the parent can be asked to cancel; the parent's end is
// stored only once its manifest is written, and it ends once.
TEST_F(SweepManifestSchedulerTest, AManifestStoreThatHangsStallsNoOtherJob) {
  absl::StatusOr<Job> parent = SubmitSweep({"int8"});
  ASSERT_TRUE(parent.ok()) << parent.status();
  Register("w", 2);
  std::optional<quark::v1::internal::LeaseResponse> a = LeaseNow("w");
  ASSERT_TRUE(a.has_value());
  hang_writes_ = true;
  std::thread ender([&] { Complete(*a, true, 10.5); });  // the sweep's last child: the parent's PUT hangs
  ASSERT_TRUE(hang_.entered.WaitForNotificationWithTimeout(absl::Seconds(60)));

  std::future<JobState> other = std::async(std::launch::async, [&]() -> JobState {
    quark::v1::JobSpec spec;
    spec.set_model_uri("file:///m");
    spec.set_output_uri(Output());
    spec.set_preset("int8");
    absl::StatusOr<Job> job = scheduler_->Submit("", spec, {});
    EXPECT_TRUE(job.ok()) << job.status();
    if (!job.ok()) return JobState::JOB_STATE_UNSPECIFIED;
    std::optional<quark::v1::internal::LeaseResponse> lease = LeaseNow("w");
    EXPECT_TRUE(lease.has_value() && lease->job().id() == job->id());
    if (!lease.has_value()) return JobState::JOB_STATE_UNSPECIFIED;
    Complete(*lease, true, 11.0);
    absl::StatusOr<Job> cancelled = scheduler_->Cancel(parent->id());  // the ending parent: unchanged
    EXPECT_TRUE(cancelled.ok()) << cancelled.status();
    return store_->GetJob(job->id())->state();
  });
  const bool scheduled = other.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  EXPECT_TRUE(scheduled) << "the other job waited for the parent's manifest (the scheduler's lock held by the write)";
  if (scheduled) EXPECT_EQ(other.get(), JobState::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(store_->GetJob(parent->id())->state(), JobState::JOB_STATE_RUNNING)
      << "the parent's end is stored only after its manifest";
  const std::string path = root_.path() + "/out/" + parent->id() + "/manifest.json";
  EXPECT_FALSE(std::filesystem::exists(path));

  hang_.released.Notify();
  ender.join();
  if (!scheduled) other.wait();
  const Job done = *store_->GetJob(parent->id());
  EXPECT_EQ(done.state(), JobState::JOB_STATE_SUCCEEDED) << done.DebugString();
  const std::string bytes = ReadFile(path);
  ASSERT_FALSE(bytes.empty()) << path;
  int manifests = 0;
  for (const std::string& log : Logs(parent->id())) manifests += log.rfind("manifest: ", 0) == 0 ? 1 : 0;
  EXPECT_EQ(manifests, 1) << ::testing::PrintToString(Logs(parent->id()));
  EXPECT_EQ(json::parse(bytes)["state"], "JOB_STATE_SUCCEEDED");
}

}  // namespace
}  // namespace quark::server
