// Tenants' max_running_jobs with a shared store: two ReplicatedScheduler replicas on one real PostgreSQL
// (tests/server/postgres_fixture.h). A tenant at its limit gets no lease through either replica, other tenants'
// jobs pass it, and a job ending through one replica frees the place for a worker parked on the other. Also
// AppendLog (the Slurm executor's events) on the shared store, and a completion retried through the other replica.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "server/scheduler/replicated_scheduler.h"
#include "server/store/postgres_job_store.h"
#include "tests/server/postgres_fixture.h"
#include "tests/support/require_peer.h"

namespace quark::server {
namespace {

namespace pb = quark::v1;
using testing::TestPostgres;

class ReplicatedTenantLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (TestPostgres::BinDir().empty()) QUARK_PEER_MISSING() << "PostgreSQL is not installed (scripts/install-deps.sh)";
    ASSERT_EQ(pg_.Start(), "");
    for (int i = 0; i < 2; ++i) {
      auto store = PostgresJobStore::Open(pg_.Dsn());
      ASSERT_TRUE(store.ok()) << store.status();
      stores_[i] = std::move(*store);
      replicas_[i] = std::make_unique<ReplicatedScheduler>(stores_[i].get(), stores_[i].get(), SystemClock::Get(),
                                                           nullptr, nullptr, SchedulerOptions());
      replicas_[i]->SetTenantRunningLimits({{"t", 1}});
    }
    // What QuarkServer's ticker does on every replica.
    ticker_ = std::thread([this] {
      while (!stop_) {
        for (auto& replica : replicas_) replica->Tick();
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
  }
  void TearDown() override {
    stop_ = true;
    if (ticker_.joinable()) ticker_.join();
    for (auto& replica : replicas_) {
      if (replica) replica->Shutdown();
    }
  }

  std::string Submit(const std::string& tenant) {
    pb::JobSpec spec;
    spec.set_preset("fp8");
    SubmitOptions options;
    options.tenant = tenant;
    auto job = replicas_[0]->Submit("", spec, options);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? job->id() : "";
  }

  // A Lease call through `replica` answered within `wait` (its callback may run on the dispatcher thread).
  std::future<pb::internal::LeaseResponse> Lease(int replica, const std::string& worker, absl::Duration wait) {
    auto answer = std::make_shared<std::promise<pb::internal::LeaseResponse>>();
    replicas_[replica]->Lease(worker, wait, [answer](pb::internal::LeaseResponse response) {
      answer->set_value(std::move(response));
    });
    return answer->get_future();
  }

  TestPostgres pg_;
  std::unique_ptr<PostgresJobStore> stores_[2];
  std::unique_ptr<ReplicatedScheduler> replicas_[2];
  std::atomic<bool> stop_{false};
  std::thread ticker_;
};

TEST_F(ReplicatedTenantLimitsTest, ALimitedTenantRunsOneJobAcrossReplicas) {
  std::string t1 = Submit("t");
  std::string t2 = Submit("t");
  std::string u1 = Submit("u");
  pb::internal::LeaseResponse first = Lease(0, "w1", absl::ZeroDuration()).get();
  EXPECT_EQ(first.job().id(), t1);
  pb::internal::LeaseResponse second = Lease(1, "w2", absl::ZeroDuration()).get();
  EXPECT_EQ(second.job().id(), u1) << "tenant t's second job passed its limit through the other replica";

  // w3 parks on replica 1: nothing it may take until t1 ends through replica 0.
  std::future<pb::internal::LeaseResponse> parked = Lease(1, "w3", absl::Seconds(20));
  EXPECT_EQ(parked.wait_for(std::chrono::milliseconds(1500)), std::future_status::timeout);
  pb::internal::CompleteRequest done;
  done.set_lease_id(first.lease_id());
  done.set_success(true);
  ASSERT_TRUE(replicas_[0]->Complete(done).ok());
  ASSERT_EQ(parked.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(parked.get().job().id(), t2);
}

TEST_F(ReplicatedTenantLimitsTest, ARaisedLimitFreesQueuedJobs) {
  Submit("t");
  std::string t2 = Submit("t");
  ASSERT_FALSE(Lease(0, "w1", absl::ZeroDuration()).get().lease_id().empty());
  std::future<pb::internal::LeaseResponse> parked = Lease(0, "w2", absl::Seconds(20));
  EXPECT_EQ(parked.wait_for(std::chrono::milliseconds(500)), std::future_status::timeout);
  replicas_[0]->SetTenantRunningLimits({{"t", 2}});
  ASSERT_EQ(parked.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_EQ(parked.get().job().id(), t2);
}

TEST_F(ReplicatedTenantLimitsTest, AppendLogAddsAnEventToQueuedJobsOnly) {
  std::string id = Submit("u");
  ASSERT_TRUE(replicas_[1]->AppendLog(id, "slurm: worker job 7 PENDING (Resources)").ok());
  auto events = stores_[0]->ListEvents(id, 0, 10);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[1].log(), "slurm: worker job 7 PENDING (Resources)");
  EXPECT_EQ((*events)[1].sequence(), 2);
  ASSERT_TRUE(replicas_[0]->Cancel(id).ok());
  EXPECT_EQ(replicas_[1]->AppendLog(id, "late").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(replicas_[1]->AppendLog("job-none", "x").code(), absl::StatusCode::kNotFound);
  events = stores_[0]->ListEvents(id, 0, 10);
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->back().state(), pb::JOB_STATE_CANCELLED) << "nothing appended after the final state";
}

// The chaos run's finding on the shared store: a worker's completion committed through one replica while PostgreSQL
// restarted, so the worker never heard; it sent the same completion again through the other replica, found the lease
// gone and deleted the published artifacts of a job recorded as succeeded. The retry is answered OK now.
TEST_F(ReplicatedTenantLimitsTest, ACompletionRetriedThroughTheOtherReplicaIsAnsweredOk) {
  pb::JobSpec spec;
  spec.set_preset("fp8");
  spec.set_output_uri("s3://bucket/out");
  auto job = replicas_[0]->Submit("", spec, SubmitOptions());
  ASSERT_TRUE(job.ok()) << job.status();
  pb::internal::LeaseResponse lease = Lease(0, "w1", absl::ZeroDuration()).get();
  ASSERT_EQ(lease.job().id(), job->id());
  const std::string folder = "s3://bucket/out/" + job->id() + "/attempt-1/";
  pb::internal::CompleteRequest done;
  done.set_lease_id(lease.lease_id());
  done.set_job_id(job->id());
  done.set_success(true);
  done.mutable_result()->set_manifest_uri(folder + "manifest.json");
  done.mutable_result()->add_artifacts()->set_uri(folder + "model.safetensors");
  ASSERT_TRUE(replicas_[0]->Complete(done).ok());
  EXPECT_TRUE(replicas_[1]->Complete(done).ok()) << "the same completion again, through the other replica";
  auto stored = stores_[1]->GetJob(job->id());
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->state(), pb::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(stored->result().manifest_uri(), folder + "manifest.json");
  pb::internal::CompleteRequest superseded = done;
  superseded.mutable_result()->set_manifest_uri("s3://bucket/out/" + job->id() + "/attempt-2/manifest.json");
  EXPECT_EQ(replicas_[1]->Complete(superseded).code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace quark::server
