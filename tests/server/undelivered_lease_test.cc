// A job that reaches a parked Lease call just as the worker cancels that call (it is stopping, or its connection
// dropped) is answered into a call nobody reads. quarkd's worker service (the real WorkerServiceImpl on a loopback
// gRPC port, over the real JobScheduler and SQLite) hands such a lease back at once instead of waiting for it to
// expire. The race is made exact by a scheduler whose CancelLeaseWait does nothing, as when the job got there first.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "quark/v1/worker.grpc.pb.h"
#include "server/api/access_control.h"
#include "server/api/worker_service.h"
#include "server/metrics/registry.h"
#include "server/scheduler/clock.h"
#include "server/scheduler/event_hub.h"
#include "server/scheduler/job_scheduler.h"
#include "server/security/authenticator.h"
#include "server/store/sqlite_job_store.h"
#include "tests/server/test_util.h"

namespace quark::server {
namespace {

using quark::v1::Job;
using quark::v1::internal::LeaseRequest;
using quark::v1::internal::LeaseResponse;

class LateCancelScheduler : public JobScheduler {
 public:
  using JobScheduler::JobScheduler;
  uint64_t Lease(const std::string& worker_id, absl::Duration wait, LeaseCallback done) override {
    uint64_t wait_id = JobScheduler::Lease(worker_id, wait, std::move(done));
    if (!parked.HasBeenNotified()) parked.Notify();
    return wait_id;
  }
  // The job is already on its way to the call: the cancel finds nothing to answer.
  void CancelLeaseWait(uint64_t /*wait_id*/) override {
    if (!cancel_seen.HasBeenNotified()) cancel_seen.Notify();
  }
  absl::Notification parked;
  absl::Notification cancel_seen;
};

TEST(UndeliveredLeaseTest, ALeaseAnsweredIntoACancelledCallIsHandedBackAtOnce) {
  testing::TempDir dir;
  ManualClock clock;
  EventHub hub;
  metrics::Registry registry;
  ServerMetrics metrics(&registry);
  absl::StatusOr<std::unique_ptr<SqliteJobStore>> store = SqliteJobStore::Open(dir.File("q.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  SchedulerOptions options;
  options.lease_timeout = absl::Hours(1);  // only a hand-back can queue the job again within this test
  options.default_max_attempts = 3;
  LateCancelScheduler scheduler(store->get(), &clock, &hub, &metrics, options);
  ASSERT_TRUE(scheduler.Recover().ok());
  absl::StatusOr<std::unique_ptr<Authenticator>> auth = Authenticator::Create("");
  ASSERT_TRUE(auth.ok()) << auth.status();
  AccessControl access(auth->get(), store->get(), &metrics, &clock);
  WorkerServiceImpl service(&scheduler, &access);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto stub = quark::v1::internal::WorkerService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));

  {
    grpc::ClientContext context;
    quark::v1::internal::RegisterRequest request;
    request.set_worker_id("w1");
    request.set_slots(1);
    request.add_devices("cpu");
    quark::v1::internal::RegisterResponse response;
    ASSERT_TRUE(stub->Register(&context, request, &response).ok());
  }

  // The worker parks a Lease call, then cancels it (it is stopping).
  grpc::ClientContext lease_context;
  LeaseRequest lease_request;
  lease_request.set_worker_id("w1");
  lease_request.set_wait_ms(60000);
  LeaseResponse lease_response;
  grpc::Status lease_status;
  std::thread caller([&] { lease_status = stub->Lease(&lease_context, lease_request, &lease_response); });
  ASSERT_TRUE(scheduler.parked.WaitForNotificationWithTimeout(absl::Seconds(30)));
  lease_context.TryCancel();
  caller.join();
  EXPECT_EQ(lease_status.error_code(), grpc::StatusCode::CANCELLED);
  ASSERT_TRUE(scheduler.cancel_seen.WaitForNotificationWithTimeout(absl::Seconds(30)));

  // A job arrives: the scheduler answers the parked call, whose answer can no longer reach the worker.
  quark::v1::JobSpec spec;
  spec.set_model_uri("file:///m");
  spec.set_output_uri("file:///out");
  spec.set_preset("w_int8_a_int8_per_tensor_sym");
  absl::StatusOr<Job> job = scheduler.Submit("", spec);
  ASSERT_TRUE(job.ok()) << job.status();

  Job back;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (;;) {
    back = *(*store)->GetJob(job->id());
    if (back.attempts_size() == 1 && back.state() == quark::v1::JOB_STATE_QUEUED) break;
    ASSERT_LT(std::chrono::steady_clock::now(), give_up)
        << "the lease answered into a cancelled call stayed held: " << back.DebugString();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_NE(back.attempts(0).error().find("Lease call did not reach it"), std::string::npos)
      << back.attempts(0).error();
  EXPECT_EQ(scheduler.RunningJobs(), 0);
  server->Shutdown();
  scheduler.Shutdown();
}

}  // namespace
}  // namespace quark::server
