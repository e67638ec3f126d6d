// Deduplication and deadlines (#17) through the real quarkd with real test workers, on the SQLite store and on a
// real PostgreSQL (the same tests; the PostgreSQL run is skipped only when its binaries are absent).
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "core/config/presets.h"
#include "quark/v1/service.grpc.pb.h"
#include "tests/server/postgres_fixture.h"
#include "tests/server/quarkd_process.h"
#include "tests/server/test_util.h"
#include "tests/support/require_peer.h"

namespace quark::server {
namespace {

namespace pb = quark::v1;
using testing::QuarkdProcess;
using testing::TestPostgres;
using testing::WaitFor;

void Write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class DedupDeadlineTest : public ::testing::TestWithParam<bool> {
 protected:
  bool postgres() const { return GetParam(); }

  void SetUp() override {
    if (postgres()) {
      if (TestPostgres::BinDir().empty()) QUARK_PEER_MISSING() << "PostgreSQL is not installed (scripts/install-deps.sh)";
      ASSERT_EQ(pg_.Start(), "");
    }
    std::filesystem::create_directories(dir_.File("models/m/sub"));
    std::filesystem::create_directories(dir_.File("data"));
    std::filesystem::create_directories(dir_.File("out"));  // the test worker publishes real files into it
    Write(dir_.File("models/m/config.json"), R"({"model_type": "llama"})");
    Write(dir_.File("models/m/sub/weights.bin"), std::string(1 << 16, 'w'));
    Write(dir_.File("data/calib-a.txt"), "calibration text a");
    Write(dir_.File("data/calib-b.txt"), "calibration text b");
    setenv("QUARK_TEST_WORKER_RUNS_FILE", dir_.File("runs.txt").c_str(), 1);
  }
  void TearDown() override { unsetenv("QUARK_TEST_WORKER_RUNS_FILE"); }

  bool StartQuarkd(int workers = 1, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"--data-dir", dir_.File("state"), "--listen", "127.0.0.1:0",
                                     "--metrics-listen", "", "--workers", std::to_string(workers),
                                     "--worker-binary", QUARK_TEST_WORKER_BINARY,
                                     "--allowed-roots", dir_.File("models") + "," + dir_.File("out") + "," +
                                         dir_.File("data"),
                                     "--heartbeat-interval-ms", "100", "--lease-timeout-ms", "3000",
                                     "--cancel-grace-ms", "500"};
    if (postgres()) args.insert(args.end(), {"--store", pg_.Dsn(), "--replica-id", "r1"});
    args.insert(args.end(), extra.begin(), extra.end());
    quarkd_ = std::make_unique<QuarkdProcess>();
    if (!quarkd_->Start(QUARKD_BINARY, args, dir_.File("ready.json"), dir_.File("quarkd.log"))) return false;
    stub_ = pb::QuantizationService::NewStub(
        grpc::CreateChannel(quarkd_->address(), grpc::InsecureChannelCredentials()));
    return true;
  }

  pb::SubmitJobRequest Request(const std::map<std::string, std::string>& labels = {}) {
    pb::SubmitJobRequest request;
    pb::JobSpec* spec = request.mutable_spec();
    spec->set_model_uri("file://" + dir_.File("models/m"));
    spec->set_output_uri("file://" + dir_.File("out"));
    spec->set_preset(AllPresets().front().name);
    spec->mutable_calibration()->set_uri("file://" + dir_.File("data/calib-a.txt"));
    spec->mutable_labels()->insert(labels.begin(), labels.end());
    return request;
  }

  pb::Job Submit(const pb::SubmitJobRequest& request, grpc::Status* status_out = nullptr) {
    grpc::ClientContext context;
    pb::Job job;
    grpc::Status status = stub_->SubmitJob(&context, request, &job);
    if (status_out != nullptr) {
      *status_out = status;
    } else {
      EXPECT_TRUE(status.ok()) << status.error_message();
    }
    return job;
  }

  pb::Job Get(const std::string& id) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    pb::GetJobRequest request;
    request.set_id(id);
    pb::Job job;
    stub_->GetJob(&context, request, &job);
    return job;
  }

  bool WaitForState(const std::string& id, pb::JobState state) {
    return WaitFor([&] { return Get(id).state() == state; });
  }

  pb::Job Cancel(const std::string& id) {
    grpc::ClientContext context;
    pb::CancelJobRequest request;
    request.set_id(id);
    pb::Job job;
    grpc::Status status = stub_->CancelJob(&context, request, &job);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return job;
  }

  std::vector<pb::JobEvent> Events(const std::string& id) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    pb::WatchJobRequest request;
    request.set_id(id);
    auto reader = stub_->WatchJob(&context, request);
    std::vector<pb::JobEvent> events;
    pb::JobEvent event;
    while (reader->Read(&event)) events.push_back(event);
    EXPECT_TRUE(reader->Finish().ok()) << id;
    return events;
  }

  std::string Log() {
    std::ifstream in(dir_.File("quarkd.log"));
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return text.size() > 20000 ? text.substr(text.size() - 20000) : text;
  }

  // How often quarkd read and hashed `path` for a content key (its log says so on every cache miss).
  int Hashes(const std::string& path) {
    std::ifstream in(dir_.File("quarkd.log"));
    std::string line;
    int count = 0;
    while (std::getline(in, line)) count += line.find("hashed " + path + " (") != std::string::npos ? 1 : 0;
    return count;
  }

  // Lines "start JOB ..." the test workers wrote: how many times a worker ran `id`.
  int Runs(const std::string& id) {
    std::ifstream in(dir_.File("runs.txt"));
    std::string line;
    int count = 0;
    while (std::getline(in, line)) count += line.rfind("start " + id + " ", 0) == 0 ? 1 : 0;
    return count;
  }

  TestPostgres pg_;
  testing::TempDir dir_;
  std::unique_ptr<QuarkdProcess> quarkd_;
  std::unique_ptr<pb::QuantizationService::Stub> stub_;
};

TEST_P(DedupDeadlineTest, ASucceededJobIsReturnedAtOnceWithItsArtifactsAndTheModelIsHashedOnce) {
  ASSERT_TRUE(StartQuarkd());
  pb::Job first = Submit(Request({{"test-mode", "sleep"}, {"test-sleep-ms", "100"}}));
  ASSERT_TRUE(WaitForState(first.id(), pb::JOB_STATE_SUCCEEDED)) << Log();
  first = Get(first.id());
  EXPECT_EQ(first.content_key().size(), 64u);
  EXPECT_TRUE(first.deduplicated_from().empty());
  ASSERT_EQ(first.result().artifacts_size(), 1);

  // Another output prefix and other labels: the same content, so the same artifacts (where the first put them).
  pb::SubmitJobRequest again = Request({{"test-mode", "sleep"}, {"team", "b"}});
  again.mutable_spec()->set_output_uri("file://" + dir_.File("out/elsewhere"));
  pb::Job second = Submit(again);
  EXPECT_EQ(second.state(), pb::JOB_STATE_SUCCEEDED) << second.DebugString();
  EXPECT_EQ(second.deduplicated_from(), first.id());
  EXPECT_EQ(second.content_key(), first.content_key());
  EXPECT_EQ(second.result().SerializeAsString(), first.result().SerializeAsString());
  EXPECT_EQ(second.attempts_size(), 0);
  EXPECT_TRUE(second.worker_id().empty());
  std::vector<pb::JobEvent> events = Events(second.id());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].log(), "deduplicated from job " + first.id() + ": its artifacts are returned");
  EXPECT_EQ(events[1].state(), pb::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(Runs(first.id()), 1);
  EXPECT_EQ(Runs(second.id()), 0) << "no worker ran the deduplicated job";

  // Two submissions, one hash of each file: the digests are cached by (path, size, mtime).
  EXPECT_EQ(Hashes(dir_.File("models/m/sub/weights.bin")), 1) << Log();
  EXPECT_EQ(Hashes(dir_.File("models/m/config.json")), 1) << Log();
  EXPECT_EQ(Hashes(dir_.File("data/calib-a.txt")), 1) << Log();
}

// #29 verified dedup, as an attacker with write access to the output folder would try it: the artifact of a
// succeeded job is rewritten after its completion (same size, mtime set back). A later identical job is not handed
// it: it runs, and the stale entry is dropped so the next identical job reuses the fresh, verified run.
TEST_P(DedupDeadlineTest, ATamperedArtifactOrManifestIsNotHandedOutAndTheJobRunsInstead) {
  ASSERT_TRUE(StartQuarkd());
  pb::Job first = Submit(Request());
  ASSERT_TRUE(WaitForState(first.id(), pb::JOB_STATE_SUCCEEDED)) << Log();
  first = Get(first.id());
  ASSERT_EQ(first.result().artifacts_size(), 1);
  const std::string artifact = first.result().artifacts(0).uri().substr(7);
  ASSERT_EQ(first.result().artifacts(0).sha256().size(), 64u);
  ASSERT_EQ(first.result().manifest_sha256().size(), 64u);
  ASSERT_TRUE(std::filesystem::exists(artifact));
  pb::Job verified = Submit(Request());
  EXPECT_EQ(verified.deduplicated_from(), first.id()) << "untouched files are verified and reused";

  struct stat before {};
  ASSERT_EQ(stat(artifact.c_str(), &before), 0);
  std::string bytes(static_cast<size_t>(before.st_size), 'X');
  Write(artifact, bytes);
  const timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(utimensat(AT_FDCWD, artifact.c_str(), times, 0), 0);  // size and mtime as they were: only ctime moved
  pb::Job tampered = Submit(Request());
  EXPECT_TRUE(tampered.deduplicated_from().empty()) << "a tampered artifact must not be handed out";
  EXPECT_NE(tampered.state(), pb::JOB_STATE_SUCCEEDED);
  ASSERT_TRUE(WaitForState(tampered.id(), pb::JOB_STATE_SUCCEEDED)) << Log();
  EXPECT_EQ(Get(tampered.id()).attempts_size(), 1);
  EXPECT_NE(Log().find("job=" + first.id() + " not reused for an identical submission"), std::string::npos) << Log();
  // The stale entries (the first job and its deduplicated copy) are dropped; the fresh run is served.
  pb::Job next = Submit(Request());
  EXPECT_EQ(next.deduplicated_from(), tampered.id());

  // The manifest is held to its recorded digest as well.
  const std::string manifest = Get(tampered.id()).result().manifest_uri().substr(7);
  Write(manifest, Read(manifest) + " ");
  pb::Job after_manifest = Submit(Request());
  EXPECT_TRUE(after_manifest.deduplicated_from().empty()) << "a changed manifest must not be handed out";
  ASSERT_TRUE(WaitForState(after_manifest.id(), pb::JOB_STATE_SUCCEEDED)) << Log();
}

// quarkd reads no object store: an s3:// result is reused only with --trust-object-store (on the worker's digests).
TEST_P(DedupDeadlineTest, ObjectStoreResultsAreReusedOnlyWithTrustObjectStore) {
  ASSERT_TRUE(StartQuarkd());
  pb::SubmitJobRequest request = Request();
  request.mutable_spec()->set_output_uri("s3://bucket/out");
  pb::Job first = Submit(request);
  ASSERT_TRUE(WaitForState(first.id(), pb::JOB_STATE_SUCCEEDED)) << Log();
  pb::Job second = Submit(request);
  EXPECT_TRUE(second.deduplicated_from().empty()) << "not verifiable, not reused";
  ASSERT_TRUE(WaitForState(second.id(), pb::JOB_STATE_SUCCEEDED)) << Log();
  quarkd_.reset();
  ASSERT_TRUE(StartQuarkd(1, {"--trust-object-store"}));
  pb::Job third = Submit(request);
  EXPECT_EQ(third.deduplicated_from(), second.id()) << "trusted: reused, and the entries were kept";
  EXPECT_EQ(third.state(), pb::JOB_STATE_SUCCEEDED);
}

TEST_P(DedupDeadlineTest, ACallerDeadlineSpentHashingCreatesNoJobAndTheRetryIsQuick) {
  ASSERT_TRUE(StartQuarkd(0));
  // 1 GiB (sparse: no disk written) takes far longer than 50 ms to hash.
  std::filesystem::resize_file(dir_.File("models/m/sub/weights.bin"), 1ll << 30);
  grpc::ClientContext hurried;
  hurried.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(50));
  pb::Job ignored;
  grpc::Status status = stub_->SubmitJob(&hurried, Request(), &ignored);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  // The hash goes on after the deadline; on a loaded machine 1 GiB took 30-45 s (two failures in 5 repeats with
  // ctest -j2 beside a build: sha256sum alone took 53 s there), so the wait is bounded generously.
  ASSERT_TRUE(WaitFor([&] { return Hashes(dir_.File("models/m/sub/weights.bin")) == 1; }, std::chrono::seconds(150)))
      << Log();
  pb::Job job = Submit(Request());
  EXPECT_EQ(job.state(), pb::JOB_STATE_QUEUED);
  EXPECT_EQ(Hashes(dir_.File("models/m/sub/weights.bin")), 1) << "the retry used the cached digest";
  grpc::ClientContext context;
  pb::ListJobsResponse jobs;
  ASSERT_TRUE(stub_->ListJobs(&context, pb::ListJobsRequest(), &jobs).ok());
  ASSERT_EQ(jobs.jobs_size(), 1) << "the call that ran out of time created nothing";
  EXPECT_EQ(jobs.jobs(0).id(), job.id());
}

TEST_P(DedupDeadlineTest, ForceOtherCalibrationDataAndAChangedModelFileRunAgain) {
  ASSERT_TRUE(StartQuarkd());
  pb::Job first = Submit(Request());
  ASSERT_TRUE(WaitForState(first.id(), pb::JOB_STATE_SUCCEEDED)) << Log();

  pb::SubmitJobRequest forced = Request();
  forced.mutable_spec()->set_force(true);
  pb::Job run_again = Submit(forced);
  EXPECT_NE(run_again.state(), pb::JOB_STATE_SUCCEEDED);
  EXPECT_TRUE(run_again.deduplicated_from().empty());
  EXPECT_EQ(run_again.content_key(), first.content_key()) << "force still stores the key";
  ASSERT_TRUE(WaitForState(run_again.id(), pb::JOB_STATE_SUCCEEDED)) << Log();
  EXPECT_EQ(Get(run_again.id()).attempts_size(), 1);

  pb::SubmitJobRequest other_data = Request();
  other_data.mutable_spec()->mutable_calibration()->set_uri("file://" + dir_.File("data/calib-b.txt"));
  pb::Job miss = Submit(other_data);
  EXPECT_TRUE(miss.deduplicated_from().empty());
  EXPECT_NE(miss.content_key(), first.content_key());
  ASSERT_TRUE(WaitForState(miss.id(), pb::JOB_STATE_SUCCEEDED)) << Log();

  // The same path with other content (size and mtime change): hashed again, a new key.
  Write(dir_.File("models/m/sub/weights.bin"), std::string((1 << 16) + 1, 'w'));
  pb::Job changed = Submit(Request());
  EXPECT_TRUE(changed.deduplicated_from().empty());
  EXPECT_NE(changed.content_key(), first.content_key());
  EXPECT_EQ(Hashes(dir_.File("models/m/sub/weights.bin")), 2) << Log();
  EXPECT_EQ(Hashes(dir_.File("models/m/config.json")), 1) << Log();
  ASSERT_TRUE(WaitForState(changed.id(), pb::JOB_STATE_SUCCEEDED)) << Log();
  EXPECT_EQ(Get(changed.id()).attempts_size(), 1);
}

TEST_P(DedupDeadlineTest, ASubmissionMatchingARunningJobFollowsItToTheEnd) {
  ASSERT_TRUE(StartQuarkd());
  pb::Job leader = Submit(Request({{"test-mode", "sleep"}, {"test-sleep-ms", "1500"}}));
  ASSERT_TRUE(WaitForState(leader.id(), pb::JOB_STATE_RUNNING)) << Log();
  pb::Job follower = Submit(Request());
  EXPECT_EQ(follower.deduplicated_from(), leader.id());
  EXPECT_EQ(follower.state(), pb::JOB_STATE_RUNNING);
  ASSERT_TRUE(WaitForState(leader.id(), pb::JOB_STATE_SUCCEEDED)) << Log();
  ASSERT_TRUE(WaitForState(follower.id(), pb::JOB_STATE_SUCCEEDED)) << Log();
  pb::Job done = Get(follower.id());
  EXPECT_EQ(done.result().SerializeAsString(), Get(leader.id()).result().SerializeAsString());
  EXPECT_EQ(done.attempts_size(), 0);
  EXPECT_EQ(Runs(leader.id()), 1);
  EXPECT_EQ(Runs(follower.id()), 0);
  std::vector<pb::JobEvent> events = Events(follower.id());
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.front().log(), "deduplicated from job " + leader.id() + ": following it until it ends");

  // Cancelling a follower leaves its leader running; the leader's end (here a cancel) is its followers' end.
  pb::SubmitJobRequest other = Request();
  other.mutable_spec()->mutable_calibration()->set_num_samples(7);  // another key
  pb::SubmitJobRequest hanging = other;
  (*hanging.mutable_spec()->mutable_labels())["test-mode"] = "hang";
  pb::Job hang_leader = Submit(hanging);
  ASSERT_TRUE(WaitForState(hang_leader.id(), pb::JOB_STATE_RUNNING)) << Log();
  pb::Job dropped = Submit(other);
  pb::Job kept = Submit(other);
  EXPECT_EQ(dropped.deduplicated_from(), hang_leader.id());
  EXPECT_EQ(kept.deduplicated_from(), hang_leader.id());
  EXPECT_EQ(Cancel(dropped.id()).state(), pb::JOB_STATE_CANCELLED);
  EXPECT_EQ(Get(hang_leader.id()).state(), pb::JOB_STATE_RUNNING);
  EXPECT_EQ(Get(kept.id()).state(), pb::JOB_STATE_RUNNING);
  Cancel(hang_leader.id());
  ASSERT_TRUE(WaitForState(kept.id(), pb::JOB_STATE_CANCELLED)) << Log();
  EXPECT_EQ(Get(kept.id()).error(), "deduplicated from job " + hang_leader.id() + ": cancelled");
  EXPECT_EQ(Get(hang_leader.id()).state(), pb::JOB_STATE_CANCELLED);
}

TEST_P(DedupDeadlineTest, AQueuedJobPastItsDeadlineFailsDeadlineExceeded) {
  ASSERT_TRUE(StartQuarkd(0));  // no workers: it can only wait
  pb::SubmitJobRequest request = Request();
  request.mutable_spec()->set_deadline_seconds(1);
  pb::Job job = Submit(request);
  EXPECT_EQ(job.state(), pb::JOB_STATE_QUEUED);
  ASSERT_TRUE(WaitForState(job.id(), pb::JOB_STATE_FAILED)) << Log();
  pb::Job failed = Get(job.id());
  EXPECT_EQ(failed.error(), "DEADLINE_EXCEEDED: deadline of 1 s passed");
  EXPECT_EQ(failed.attempts_size(), 0);
  std::vector<pb::JobEvent> events = Events(job.id());
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().job().error(), "DEADLINE_EXCEEDED: deadline of 1 s passed");

  request.mutable_spec()->set_deadline_seconds(-5);
  grpc::Status status;
  Submit(request, &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("spec.deadline_seconds"), std::string::npos) << status.error_message();
  request.mutable_spec()->set_deadline_seconds(400LL * 24 * 3600);
  Submit(request, &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("spec.deadline_seconds: 34560000 is not in 0..31622400"), std::string::npos)
      << status.error_message();
}

TEST_P(DedupDeadlineTest, ARunningJobPastItsDeadlineIsStoppedAndNotRetried) {
  ASSERT_TRUE(StartQuarkd());
  pb::SubmitJobRequest request = Request({{"test-mode", "hang"}});
  request.mutable_spec()->set_deadline_seconds(2);
  request.mutable_spec()->set_max_attempts(3);
  pb::Job job = Submit(request);
  ASSERT_TRUE(WaitForState(job.id(), pb::JOB_STATE_RUNNING)) << Log();
  ASSERT_TRUE(WaitForState(job.id(), pb::JOB_STATE_FAILED)) << Log();
  pb::Job failed = Get(job.id());
  EXPECT_EQ(failed.error().rfind("DEADLINE_EXCEEDED: deadline of 2 s passed", 0), 0u) << failed.error();
  ASSERT_EQ(failed.attempts_size(), 1) << "a deadline is not retried";
  EXPECT_EQ(failed.attempts(0).error().rfind("DEADLINE_EXCEEDED", 0), 0u) << failed.attempts(0).error();
  bool told = false;
  for (const pb::JobEvent& event : Events(job.id())) {
    told = told || event.log().find("deadline of 2 s passed; worker") != std::string::npos;
  }
  EXPECT_TRUE(told);
  // The worker stopped it (hang mode completes as cancelled when told): its one slot runs the next job.
  pb::SubmitJobRequest forced = Request();
  forced.mutable_spec()->set_force(true);
  pb::Job after = Submit(forced);
  ASSERT_TRUE(WaitForState(after.id(), pb::JOB_STATE_SUCCEEDED)) << Log();
  EXPECT_EQ(Get(after.id()).worker_id(), failed.worker_id());
}

INSTANTIATE_TEST_SUITE_P(Stores, DedupDeadlineTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("PostgreSQL") : std::string("SQLite");
                         });

}  // namespace
}  // namespace quark::server
