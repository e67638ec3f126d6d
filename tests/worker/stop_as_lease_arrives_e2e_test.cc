// A worker told to stop just as quarkd (the real executable) answers its Lease call with a job hands that job back at
// once, without running it, instead of dropping it and leaving quarkd to wait out the lease (the CI failure of
// ReplicatedTest.SigtermDrainsFinishingRunningJobsAndHandsBackTheRest: "lease lost ... sent no heartbeat"). The
// moment is made exact with a client interceptor that stops the agent when a Lease answer carrying a lease arrives,
// before the agent's own code sees it.
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/client_interceptor.h>

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "quark/v1/service.grpc.pb.h"
#include "quark/v1/worker.pb.h"
#include "tests/worker/support/quarkd.h"
#include "tests/worker/support/run_job.h"
#include "worker/job_runner.h"
#include "worker/worker_agent.h"

namespace quark::worker {
namespace {

using grpc::experimental::InterceptionHookPoints;

class CountingRunner : public JobRunner {
 public:
  absl::StatusOr<quark::v1::JobResult> Run(const quark::v1::Job& /*job*/, const LeaseContext& /*lease*/,
                                           ProgressSink& /*progress*/, const CancelToken& /*cancel*/) override {
    runs_.fetch_add(1);
    return quark::v1::JobResult();
  }
  std::atomic<int> runs_{0};
};

// Calls `stop` once a Lease call has received an answer with a lease and an OK status.
class StopOnLeaseInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit StopOnLeaseInterceptor(std::function<void()> stop) : stop_(std::move(stop)) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
      const auto* response = static_cast<const quark::v1::internal::LeaseResponse*>(methods->GetRecvMessage());
      carries_lease_ = response != nullptr && !response->lease_id().empty();
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_STATUS) && carries_lease_ &&
        methods->GetRecvStatus()->ok()) {
      stop_();
    }
    methods->Proceed();
  }

 private:
  std::function<void()> stop_;
  bool carries_lease_ = false;
};

class StopOnLeaseFactory : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit StopOnLeaseFactory(std::function<void()> stop) : stop_(std::move(stop)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(grpc::experimental::ClientRpcInfo* info) override {
    if (std::string(info->method()) != "/quark.v1.internal.WorkerService/Lease") return nullptr;
    return new StopOnLeaseInterceptor(stop_);
  }

 private:
  std::function<void()> stop_;
};

TEST(StopAsLeaseArrivesE2eTest, ALeaseThatArrivesAsTheWorkerStopsIsHandedBackAtOnce) {
  quark::testing::QuarkdOptions options;
  options.workers = 0;
  // A lease quarkd would only take back after a minute: the job can be queued again within the wait below only if
  // the worker hands it back.
  options.extra_args = {"--lease-timeout-ms", "60000"};
  absl::StatusOr<std::unique_ptr<quark::testing::Quarkd>> quarkd = quark::testing::Quarkd::Start(options);
  ASSERT_TRUE(quarkd.ok()) << quarkd.status();
  const std::string root = (*quarkd)->root().string();
  std::filesystem::create_directories(root + "/models/m");

  std::atomic<WorkerAgent*> agent_to_stop{nullptr};
  std::atomic<int> stops{0};
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<StopOnLeaseFactory>([&] {
    if (stops.fetch_add(1) == 0) agent_to_stop.load()->Stop();
  }));
  std::shared_ptr<grpc::Channel> channel = grpc::experimental::CreateCustomChannelWithInterceptors(
      (*quarkd)->address(), grpc::InsecureChannelCredentials(), grpc::ChannelArguments(), std::move(interceptors));

  auto runner = std::make_shared<CountingRunner>();
  WorkerAgentOptions agent_options;
  agent_options.server_address = (*quarkd)->address();
  agent_options.worker_id = "stop-as-lease-arrives";
  agent_options.lease_wait = std::chrono::milliseconds(300);
  WorkerAgent agent(agent_options, runner, channel);
  agent_to_stop.store(&agent);
  std::thread agent_thread([&] { EXPECT_TRUE(agent.Run().ok()); });

  auto stub = quark::v1::QuantizationService::NewStub(
      grpc::CreateChannel((*quarkd)->address(), grpc::InsecureChannelCredentials()));
  const quark::v1::Job job = quark::testing::SubmitJob(*stub, quark::testing::EmptyModelJob(root, 3));
  ASSERT_FALSE(job.id().empty());

  quark::v1::Job back;
  const bool handed_back = quark::testing::WaitUntil(
      [&] {
        back = quark::testing::GetJob(*stub, job.id());
        return back.state() == quark::v1::JOB_STATE_QUEUED && back.attempts_size() == 1;
      },
      std::chrono::seconds(20));
  agent_thread.join();  // Run() returns once stopped
  ASSERT_TRUE(handed_back) << "the job stayed leased to a stopped worker: " << back.DebugString() << (*quarkd)->Log();
  EXPECT_EQ(stops.load(), 1);
  EXPECT_EQ(runner->runs_.load(), 0) << "a worker that was stopping ran the job";
  EXPECT_NE(back.attempts(0).error().find("shutting down"), std::string::npos) << back.attempts(0).error();
  EXPECT_NE(back.attempts(0).error().find("the lease arrived as the worker stopped"), std::string::npos)
      << back.attempts(0).error();
}

}  // namespace
}  // namespace quark::worker
