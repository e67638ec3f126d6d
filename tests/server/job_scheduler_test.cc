#include "server/scheduler/job_scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "server/metrics/registry.h"
#include "server/scheduler/result_check.h"
#include "server/store/sqlite_job_store.h"
#include "tests/server/scheduler_fixture.h"

namespace quark::server {
namespace {

using quark::v1::Job;
using quark::v1::JobState;
using quark::v1::internal::LeaseResponse;
using quark::v1::internal::RegisterRequest;

class JobSchedulerTest : public testing::SchedulerFixture {
 protected:
  JobSchedulerTest() : SchedulerFixture(ShortOptions()) {}

  Job Submit(int priority = 0, const std::string& request_id = "", int gpus = 0) {
    quark::v1::JobSpec spec;
    spec.set_model_uri("file:///m");
    spec.set_output_uri("file:///out");
    spec.set_preset("w_int8_a_int8_per_tensor_sym");
    spec.set_priority(priority);
    spec.mutable_resources()->set_gpus(gpus);
    absl::StatusOr<Job> job = scheduler_->Submit(request_id, spec);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? *job : Job();
  }

  void Register(const std::string& worker_id, int slots = 1, std::vector<std::string> devices = {"cpu"}) {
    RegisterRequest request;
    request.set_worker_id(worker_id);
    request.set_slots(slots);
    for (const std::string& device : devices) request.add_devices(device);
    scheduler_->Register(request);
  }

  JobState StateOf(const std::string& id) { return store_->GetJob(id)->state(); }
};

TEST_F(JobSchedulerTest, RunsHigherPriorityFirstThenInSubmissionOrder) {
  Job low = Submit(0);
  Job high = Submit(5);
  Job low2 = Submit(0);
  Register("w");
  std::vector<std::string> order;
  for (int i = 0; i < 3; ++i) {
    std::optional<LeaseResponse> lease = LeaseNow("w");
    ASSERT_TRUE(lease.has_value());
    order.push_back(lease->job().id());
    quark::v1::internal::CompleteRequest done;
    done.set_lease_id(lease->lease_id());
    done.set_success(true);
    ASSERT_TRUE(scheduler_->Complete(done).ok());
  }
  EXPECT_EQ(order, (std::vector<std::string>{high.id(), low.id(), low2.id()}));
  EXPECT_EQ(StateOf(low.id()), JobState::JOB_STATE_SUCCEEDED);
}

TEST_F(JobSchedulerTest, OneJobPerSlot) {
  Submit();
  Submit();
  Register("w", 1);
  ASSERT_TRUE(LeaseNow("w").has_value());
  EXPECT_FALSE(LeaseNow("w").has_value());
  Register("w2", 1);
  EXPECT_TRUE(LeaseNow("w2").has_value());
}

// A job asking for GPUs goes only to a worker that announced as many GPU devices; CPU workers pass over it to the
// jobs behind it, also when it is first in the queue, and a parked CPU worker is not handed it.
TEST_F(JobSchedulerTest, GpuJobsGoOnlyToWorkersWithTheirGpus) {
  Job gpu_job = Submit(5, "", /*gpus=*/2);
  Job cpu_job = Submit(0);
  Register("cpu-worker", 2);
  std::optional<LeaseResponse> first = LeaseNow("cpu-worker");
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->job().id(), cpu_job.id()) << "the higher-priority GPU job is not the CPU worker's";
  EXPECT_FALSE(LeaseNow("cpu-worker").has_value()) << "a free slot, but only the GPU job is left";
  EXPECT_EQ(StateOf(gpu_job.id()), JobState::JOB_STATE_QUEUED);

  Register("one-gpu", 1, {"cpu", "cuda:0"});
  EXPECT_FALSE(LeaseNow("one-gpu").has_value()) << "asks for 2 GPUs";

  std::optional<LeaseResponse> parked;
  scheduler_->Lease("cpu-worker", absl::Seconds(30), [&](LeaseResponse r) { parked = std::move(r); });
  Register("two-gpus", 1, {"cuda:0", "cuda:1"});
  std::optional<LeaseResponse> gpu_lease = LeaseNow("two-gpus");
  ASSERT_TRUE(gpu_lease.has_value());
  EXPECT_EQ(gpu_lease->job().id(), gpu_job.id());
  EXPECT_FALSE(parked.has_value());

  Job next_cpu_job = Submit(0);  // answers the parked CPU worker
  ASSERT_TRUE(parked.has_value());
  EXPECT_EQ(parked->job().id(), next_cpu_job.id());

  // GPU workers take CPU jobs too.
  Job later = Submit(0);
  std::optional<LeaseResponse> any = LeaseNow("one-gpu");
  ASSERT_TRUE(any.has_value());
  EXPECT_EQ(any->job().id(), later.id());
}

TEST_F(JobSchedulerTest, ParkedLeaseIsAnsweredBySubmit) {
  Register("w");
  std::optional<LeaseResponse> answer;
  scheduler_->Lease("w", absl::Seconds(30), [&](LeaseResponse r) { answer = std::move(r); });
  EXPECT_FALSE(answer.has_value());
  Job job = Submit();
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->job().id(), job.id());
  EXPECT_EQ(answer->attempt(), 1);
  EXPECT_EQ(StateOf(job.id()), JobState::JOB_STATE_RUNNING);
}

TEST_F(JobSchedulerTest, ParkedLeaseIsAnsweredEmptyWhenItsWaitEnds) {
  Register("idle");
  std::optional<LeaseResponse> empty;
  scheduler_->Lease("idle", absl::Seconds(30), [&](LeaseResponse r) { empty = std::move(r); });
  clock_.Advance(absl::Seconds(29));
  scheduler_->Tick();
  EXPECT_FALSE(empty.has_value());
  clock_.Advance(absl::Seconds(2));
  scheduler_->Tick();
  ASSERT_TRUE(empty.has_value());
  EXPECT_TRUE(empty->lease_id().empty());
}

TEST_F(JobSchedulerTest, LostLeasesRequeueThenFailListingEveryAttempt) {
  Job job = Submit();
  Register("w1");
  std::optional<LeaseResponse> first = LeaseNow("w1");
  ASSERT_TRUE(first.has_value());
  // Heartbeats keep the lease past its timeout.
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(absl::Seconds(6));
    auto beat = scheduler_->Heartbeat("w1", first->lease_id());
    EXPECT_FALSE(beat.lease_lost());
    scheduler_->Tick();
  }
  EXPECT_EQ(StateOf(job.id()), JobState::JOB_STATE_RUNNING);
  clock_.Advance(absl::Seconds(11));
  scheduler_->Tick();
  EXPECT_EQ(StateOf(job.id()), JobState::JOB_STATE_QUEUED);
  EXPECT_TRUE(scheduler_->Heartbeat("w1", first->lease_id()).lease_lost());

  Register("w2");
  std::optional<LeaseResponse> second = LeaseNow("w2");
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->attempt(), 2);
  clock_.Advance(absl::Seconds(11));
  scheduler_->Tick();
  Job failed = *store_->GetJob(job.id());
  EXPECT_EQ(failed.state(), JobState::JOB_STATE_FAILED);
  ASSERT_EQ(failed.attempts_size(), 2);
  EXPECT_NE(failed.error().find("attempt 1 on w1"), std::string::npos) << failed.error();
  EXPECT_NE(failed.error().find("attempt 2 on w2"), std::string::npos) << failed.error();
  EXPECT_NE(failed.attempts(0).error().find("no heartbeat"), std::string::npos);
}

TEST_F(JobSchedulerTest, AWorkerRegisteringAgainLosesItsJobsToTheQueue) {
  Job job = Submit();
  Register("local-0");
  ASSERT_TRUE(LeaseNow("local-0").has_value());
  Register("local-0");  // its process restarted
  std::optional<LeaseResponse> again = LeaseNow("local-0");
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->job().id(), job.id());
  EXPECT_EQ(again->attempt(), 2);
  EXPECT_NE(again->job().attempts(0).error().find("restarted"), std::string::npos);
}

TEST_F(JobSchedulerTest, ReRegistrationAnswersTheOldProcessesParkedLease) {
  Register("local-0");
  std::optional<LeaseResponse> stale;
  scheduler_->Lease("local-0", absl::Seconds(30), [&](LeaseResponse r) { stale = std::move(r); });
  Register("local-0");
  ASSERT_TRUE(stale.has_value());
  EXPECT_TRUE(stale->lease_id().empty());
  Job job = Submit();
  std::optional<LeaseResponse> fresh = LeaseNow("local-0");
  ASSERT_TRUE(fresh.has_value());
  EXPECT_EQ(fresh->job().id(), job.id());
}

// Deadlines (#17) on the manual clock: exactly at the deadline a queued job fails; a running one is told to stop,
// and ends FAILED DEADLINE_EXCEEDED however it stops (completes cancelled, ignores it and is killed, loses its
// lease), never requeued.
TEST_F(JobSchedulerTest, DeadlinesFailQueuedJobsAndStopRunningOnesWithoutRetry) {
  std::vector<std::string> killed;
  scheduler_->SetWorkerKiller([&](const std::string& worker_id) { killed.push_back(worker_id); });
  auto submit = [&](int64_t deadline, int priority) {
    quark::v1::JobSpec spec;
    spec.set_model_uri("file:///m");
    spec.set_output_uri("file:///out");
    spec.set_preset("w_int8_a_int8_per_tensor_sym");
    spec.set_priority(priority);
    spec.set_deadline_seconds(deadline);
    return *scheduler_->Submit("", spec);
  };
  Job queued = submit(30, 0);
  Job completes = submit(30, 3);
  Job ignores = submit(30, 2);
  Job vanishes = submit(30, 1);
  Register("w", 3);
  std::map<std::string, LeaseResponse> leases;
  for (int i = 0; i < 3; ++i) {
    std::optional<LeaseResponse> lease = LeaseNow("w");
    ASSERT_TRUE(lease.has_value());
    leases[lease->job().id()] = *lease;
  }
  ASSERT_EQ(leases.count(queued.id()), 0u);
  for (int i = 0; i < 5; ++i) {  // heartbeats every 5 s keep the 10 s leases
    clock_.Advance(absl::Seconds(5));
    scheduler_->Tick();
    for (const auto& [id, lease] : leases) EXPECT_FALSE(scheduler_->Heartbeat("w", lease.lease_id()).cancel());
  }
  clock_.Advance(absl::Seconds(4));  // 29 s: not yet
  scheduler_->Tick();
  EXPECT_EQ(StateOf(queued.id()), JobState::JOB_STATE_QUEUED);
  clock_.Advance(absl::Seconds(1));  // 30 s
  scheduler_->Tick();
  EXPECT_EQ(StateOf(queued.id()), JobState::JOB_STATE_FAILED);
  EXPECT_EQ(store_->GetJob(queued.id())->error(), "DEADLINE_EXCEEDED: deadline of 30 s passed");
  for (const Job& job : {completes, ignores}) {  // `vanishes` went silent after 25 s
    EXPECT_EQ(StateOf(job.id()), JobState::JOB_STATE_RUNNING);
    EXPECT_TRUE(scheduler_->Heartbeat("w", leases[job.id()].lease_id()).cancel()) << job.id();
  }
  quark::v1::internal::CompleteRequest done;
  done.set_lease_id(leases[completes.id()].lease_id());
  done.set_cancelled(true);
  ASSERT_TRUE(scheduler_->Complete(done).ok());
  EXPECT_EQ(store_->GetJob(completes.id())->error(), "DEADLINE_EXCEEDED: deadline of 30 s passed");
  // 35 s: the grace is over for the one that ignored the stop (killed), and the silent one's lease expired.
  clock_.Advance(absl::Seconds(5));
  scheduler_->Tick();
  EXPECT_EQ(killed, std::vector<std::string>{"w"});
  Job ignored = *store_->GetJob(ignores.id());
  EXPECT_EQ(ignored.state(), JobState::JOB_STATE_FAILED);
  EXPECT_EQ(ignored.error().rfind("DEADLINE_EXCEEDED: deadline of 30 s passed; worker w did not stop", 0), 0u)
      << ignored.error();
  Job lost = *store_->GetJob(vanishes.id());
  EXPECT_EQ(lost.state(), JobState::JOB_STATE_FAILED) << "a lost lease after the deadline is not requeued";
  EXPECT_EQ(lost.error(), "DEADLINE_EXCEEDED: deadline of 30 s passed");
  EXPECT_EQ(lost.attempts_size(), 1);
  EXPECT_EQ(scheduler_->QueueDepth(), 0);
}

// A follower (same content key as a running job) is never leased, runs and ends in step with its leader, also
// across a restart of quarkd; a key matching a succeeded job returns it at once.
TEST_F(JobSchedulerTest, FollowersTrackTheirLeaderAcrossARestart) {
  quark::v1::JobSpec spec;
  spec.set_model_uri("file:///m");
  spec.set_output_uri("file:///out");
  spec.set_preset("w_int8_a_int8_per_tensor_sym");
  SubmitOptions keyed;
  keyed.content_key = "k";
  Job leader = *scheduler_->Submit("", spec, keyed);
  Job follower = *scheduler_->Submit("", spec, keyed);
  EXPECT_EQ(follower.deduplicated_from(), leader.id());
  EXPECT_EQ(follower.state(), JobState::JOB_STATE_QUEUED);
  EXPECT_EQ(scheduler_->QueueDepth(), 1);
  Register("w", 2);
  std::optional<LeaseResponse> lease = LeaseNow("w");
  ASSERT_TRUE(lease.has_value());
  EXPECT_EQ(lease->job().id(), leader.id());
  EXPECT_FALSE(LeaseNow("w").has_value()) << "a follower is never leased";
  EXPECT_EQ(StateOf(follower.id()), JobState::JOB_STATE_RUNNING);

  Open();  // quarkd restarts: the leader's lease is lost and it is requeued; its follower with it
  EXPECT_EQ(StateOf(leader.id()), JobState::JOB_STATE_QUEUED);
  EXPECT_EQ(StateOf(follower.id()), JobState::JOB_STATE_QUEUED);
  Register("w2");
  lease = LeaseNow("w2");
  ASSERT_TRUE(lease.has_value());
  EXPECT_EQ(lease->job().id(), leader.id());
  quark::v1::internal::CompleteRequest done;
  done.set_lease_id(lease->lease_id());
  done.set_success(true);
  done.mutable_result()->set_manifest_uri("file:///out/" + leader.id() + "/manifest.json");
  ASSERT_TRUE(scheduler_->Complete(done).ok());
  Job ended = *store_->GetJob(follower.id());
  EXPECT_EQ(ended.state(), JobState::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(ended.result().manifest_uri(), done.result().manifest_uri());
  EXPECT_EQ(ended.attempts_size(), 0);

  Job hit = *scheduler_->Submit("", spec, keyed);
  EXPECT_EQ(hit.state(), JobState::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(hit.deduplicated_from(), leader.id()) << "the job that ran, not the follower";
  spec.set_force(true);
  EXPECT_EQ(scheduler_->Submit("", spec, keyed)->state(), JobState::JOB_STATE_QUEUED);
  SubmitOptions other_tenant = keyed;
  other_tenant.tenant = "t2";
  spec.set_force(false);
  EXPECT_TRUE(scheduler_->Submit("", spec, other_tenant)->deduplicated_from().empty());
}

TEST_F(JobSchedulerTest, FollowersCountTowardNoTenantQuotaOrRunningLimit) {
  quark::v1::JobSpec spec;
  spec.set_model_uri("file:///m");
  spec.set_output_uri("file:///out");
  spec.set_preset("w_int8_a_int8_per_tensor_sym");
  SubmitOptions keyed{"a", 2};
  keyed.content_key = "k";
  Job leader = *scheduler_->Submit("", spec, keyed);
  Job follower = *scheduler_->Submit("", spec, keyed);
  ASSERT_EQ(follower.deduplicated_from(), leader.id());
  SubmitOptions other = keyed;
  other.content_key = "k2";
  absl::StatusOr<Job> second = scheduler_->Submit("", spec, other);
  ASSERT_TRUE(second.ok()) << second.status() << " (the follower took a queued slot)";
  scheduler_->SetTenantRunningLimits({{"a", 2}});
  Register("w1");
  Register("w2");
  EXPECT_EQ(LeaseNow("w1")->job().id(), leader.id());
  EXPECT_EQ(StateOf(follower.id()), JobState::JOB_STATE_RUNNING);
  std::optional<LeaseResponse> next = LeaseNow("w2");
  ASSERT_TRUE(next.has_value()) << "the running follower took a running slot";
  EXPECT_EQ(next->job().id(), second->id());
}

TEST_F(JobSchedulerTest, CancelQueuedAndRunningJobs) {
  Job queued = Submit();
  Job running = Submit(10);
  Register("w");
  std::optional<LeaseResponse> lease = LeaseNow("w");
  ASSERT_EQ(lease->job().id(), running.id());

  EXPECT_EQ(scheduler_->Cancel(queued.id())->state(), JobState::JOB_STATE_CANCELLED);
  EXPECT_EQ(scheduler_->Cancel(running.id())->state(), JobState::JOB_STATE_RUNNING);
  EXPECT_TRUE(scheduler_->Heartbeat("w", lease->lease_id()).cancel());
  quark::v1::internal::ReportProgressRequest progress;
  progress.set_lease_id(lease->lease_id());
  progress.mutable_progress()->set_phase("quantize");
  EXPECT_TRUE(*scheduler_->ReportProgress(progress));
  quark::v1::internal::CompleteRequest done;
  done.set_lease_id(lease->lease_id());
  done.set_cancelled(true);
  ASSERT_TRUE(scheduler_->Complete(done).ok());
  EXPECT_EQ(StateOf(running.id()), JobState::JOB_STATE_CANCELLED);
  EXPECT_EQ(scheduler_->Cancel("job-nope").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(JobSchedulerTest, AWorkerThatIgnoresCancelIsKilledAfterTheGracePeriod) {
  std::vector<std::string> killed;
  scheduler_->SetWorkerKiller([&](const std::string& worker_id) { killed.push_back(worker_id); });
  Job job = Submit();
  Register("w");
  std::optional<LeaseResponse> lease = LeaseNow("w");
  ASSERT_TRUE(lease.has_value());
  scheduler_->Cancel(job.id()).IgnoreError();
  clock_.Advance(absl::Seconds(4));
  scheduler_->Heartbeat("w", lease->lease_id());
  scheduler_->Tick();
  EXPECT_TRUE(killed.empty());
  clock_.Advance(absl::Seconds(2));
  scheduler_->Tick();
  EXPECT_EQ(killed, std::vector<std::string>{"w"});
  EXPECT_EQ(StateOf(job.id()), JobState::JOB_STATE_CANCELLED);
  EXPECT_TRUE(scheduler_->Heartbeat("w", lease->lease_id()).lease_lost());
}

TEST_F(JobSchedulerTest, WorkerFailureIsFinalAndSuccessCarriesTheResult) {
  Job bad = Submit();
  Job good = Submit();
  Register("w");
  std::optional<LeaseResponse> lease = LeaseNow("w");
  quark::v1::internal::CompleteRequest fail;
  fail.set_lease_id(lease->lease_id());
  fail.set_error("model_uri: no such directory");
  ASSERT_TRUE(scheduler_->Complete(fail).ok());
  EXPECT_EQ(store_->GetJob(bad.id())->error(), "model_uri: no such directory");
  EXPECT_EQ(StateOf(bad.id()), JobState::JOB_STATE_FAILED);
  lease = LeaseNow("w");
  quark::v1::internal::CompleteRequest ok;
  ok.set_lease_id(lease->lease_id());
  ok.set_success(true);
  quark::v1::Artifact* artifact = ok.mutable_result()->add_artifacts();
  artifact->set_uri(JobOutputPrefix(lease->job()) + "model.safetensors");
  artifact->set_size_bytes(100);
  ASSERT_TRUE(scheduler_->Complete(ok).ok());
  EXPECT_EQ(store_->GetJob(good.id())->result().artifacts_size(), 1);
  EXPECT_EQ(metrics_.uploaded_bytes.Value(), 100);
  EXPECT_EQ(scheduler_->Complete(ok).code(), absl::StatusCode::kNotFound);  // completed once only
}

// The chaos run's finding: a completion quarkd took but never answered (the reply lost, or PostgreSQL committed and
// then restarted) is sent again, finds its lease gone, and the worker used to delete what the job had published. A
// retry naming its job with the manifest the job succeeded with is answered OK now; nothing else changes.
TEST_F(JobSchedulerTest, ACompletionSentAgainAfterItWasTakenIsAnsweredOk) {
  Job job = Submit();
  Job other = Submit();
  Register("w");
  std::optional<LeaseResponse> lease = LeaseNow("w");
  ASSERT_TRUE(lease.has_value());
  ASSERT_EQ(lease->job().id(), job.id());
  const std::string folder = JobOutputPrefix(lease->job()) + "attempt-1/";
  quark::v1::internal::CompleteRequest done;
  done.set_lease_id(lease->lease_id());
  done.set_job_id(job.id());
  done.set_success(true);
  done.mutable_result()->set_manifest_uri(folder + "manifest.json");
  done.mutable_result()->add_artifacts()->set_uri(folder + "model.safetensors");
  ASSERT_TRUE(scheduler_->Complete(done).ok());
  const size_t events = store_->ListEvents(job.id(), 0, 100)->size();

  EXPECT_TRUE(scheduler_->Complete(done).ok()) << "the retry of a completion that was taken";
  EXPECT_EQ(StateOf(job.id()), JobState::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(store_->GetJob(job.id())->attempts_size(), 1);
  EXPECT_EQ(store_->ListEvents(job.id(), 0, 100)->size(), events) << "the retry wrote nothing";

  // Anything but that same success stays refused: another attempt's manifest, no job named, a failure, another job.
  quark::v1::internal::CompleteRequest stale = done;
  stale.mutable_result()->set_manifest_uri(JobOutputPrefix(lease->job()) + "attempt-2/manifest.json");
  EXPECT_EQ(scheduler_->Complete(stale).code(), absl::StatusCode::kNotFound);
  quark::v1::internal::CompleteRequest unnamed = done;
  unnamed.clear_job_id();
  EXPECT_EQ(scheduler_->Complete(unnamed).code(), absl::StatusCode::kNotFound);
  quark::v1::internal::CompleteRequest failed = done;
  failed.set_success(false);
  failed.set_error("late failure");
  EXPECT_EQ(scheduler_->Complete(failed).code(), absl::StatusCode::kNotFound);
  quark::v1::internal::CompleteRequest queued = done;
  queued.set_job_id(other.id());  // still queued: it never succeeded with that manifest
  EXPECT_EQ(scheduler_->Complete(queued).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(StateOf(other.id()), JobState::JOB_STATE_QUEUED);
}

// Issue #29: job and lease ids came from one 32-bit random_device seed of mt19937_64 (80 bits shown, but only 2^32
// sequences: one id gave away every other). Now 128 bits of OpenSSL's CSPRNG each.
TEST(NewIdTest, IdsAre128RandomBitsInHex) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    const std::string id = NewId("lease-");
    ASSERT_EQ(id.size(), std::string("lease-").size() + 32) << id;
    EXPECT_EQ(id.find_first_not_of("0123456789abcdef", 6), std::string::npos) << id;
    EXPECT_TRUE(seen.insert(id).second) << "repeated " << id;
  }
  // Every hex digit position varies (a fixed or counter-like part would not).
  for (size_t pos = 6; pos < 38; ++pos) {
    std::set<char> digits;
    for (const std::string& id : seen) digits.insert(id[pos]);
    EXPECT_GE(digits.size(), 8u) << "position " << pos;
  }
}

TEST_F(JobSchedulerTest, RepeatedRequestIdReturnsTheSameJob) {
  Job first = Submit(0, "req-1");
  Job second = Submit(0, "req-1");
  EXPECT_EQ(first.id(), second.id());
  EXPECT_EQ(scheduler_->QueueDepth(), 1);
}

TEST_F(JobSchedulerTest, RecoverKeepsQueuedJobsAndRequeuesRunningOnes) {
  Job running = Submit(1);
  Job queued = Submit(0);
  Register("w");
  ASSERT_TRUE(LeaseNow("w").has_value());
  Open();  // a new scheduler on the same store, as after a restart
  EXPECT_EQ(scheduler_->QueueDepth(), 2);
  EXPECT_EQ(StateOf(running.id()), JobState::JOB_STATE_QUEUED);
  Register("w");
  std::optional<LeaseResponse> lease = LeaseNow("w");
  ASSERT_TRUE(lease.has_value());
  EXPECT_EQ(lease->job().id(), running.id());
  EXPECT_EQ(lease->attempt(), 2);
  EXPECT_NE(lease->job().attempts(0).error().find("restarted"), std::string::npos);
}

TEST_F(JobSchedulerTest, EventsArePublishedInSequence) {
  std::vector<int64_t> sequences;
  Job job = Submit();
  uint64_t id = hub_.Subscribe(job.id(), [&](const quark::v1::JobEvent& e) { sequences.push_back(e.sequence()); });
  Register("w");
  std::optional<LeaseResponse> lease = LeaseNow("w");
  quark::v1::internal::ReportProgressRequest progress;
  progress.set_lease_id(lease->lease_id());
  progress.mutable_progress()->set_phase("quantize");
  progress.set_log("layer 1 done");
  ASSERT_TRUE(scheduler_->ReportProgress(progress).ok());
  hub_.Unsubscribe(id);
  EXPECT_EQ(sequences, (std::vector<int64_t>{2, 3, 4}));
}

TEST_F(JobSchedulerTest, TenantQuotasAndRunningLimitsAndDraining) {
  quark::v1::JobSpec spec;
  spec.set_model_uri("file:///m");
  spec.set_output_uri("file:///out");
  spec.set_preset("w_int8_a_int8_per_tensor_sym");
  SubmitOptions a{"a", 2};
  ASSERT_TRUE(scheduler_->Submit("", spec, a).ok());
  ASSERT_TRUE(scheduler_->Submit("r", spec, a).ok());
  absl::StatusOr<Job> over = scheduler_->Submit("", spec, a);
  ASSERT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(over.status().message().find("tenant a: quota max_queued_jobs=2 reached (2 jobs queued)"),
            std::string::npos)
      << over.status();
  EXPECT_TRUE(scheduler_->Submit("r", spec, a).ok()) << "a repeated request id still answers its job";
  ASSERT_TRUE(scheduler_->Submit("", spec, SubmitOptions{"b", 0}).ok());

  // Tenant a may run one job at once: the second worker skips a's next job and takes b's.
  scheduler_->SetTenantRunningLimits({{"a", 1}});
  Register("w1");
  Register("w2");
  Register("w3");
  std::optional<LeaseResponse> first = LeaseNow("w1");
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->job().tenant(), "a");
  std::optional<LeaseResponse> second = LeaseNow("w2");
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->job().tenant(), "b");
  EXPECT_FALSE(LeaseNow("w3").has_value());
  // Draining w3 keeps it from a's job once the limit is lifted; resuming lets it take it.
  EXPECT_TRUE(scheduler_->SetDraining("w3", true));
  scheduler_->SetTenantRunningLimits({});
  EXPECT_FALSE(LeaseNow("w3").has_value());
  EXPECT_TRUE(scheduler_->SetDraining("w3", false));
  std::optional<LeaseResponse> third = LeaseNow("w3");
  ASSERT_TRUE(third.has_value());
  EXPECT_EQ(third->job().tenant(), "a");
}

}  // namespace
}  // namespace quark::server
