// The client side shared by the gRPC tests of quarkd: a temp folder whose models/m and out are the allowed roots,
// the two services' stubs, a valid request to start from, and the test acting as a worker (register, lease).
// ApiTestBase::StartQuarkd runs the real quarkd binary; tests of an in-process QuarkServer call Connect.
#pragma once

#include <grpcpp/grpcpp.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/config/presets.h"
#include "quark/v1/service.grpc.pb.h"
#include "quark/v1/worker.grpc.pb.h"
#include "tests/server/quarkd_process.h"
#include "tests/server/test_util.h"

namespace quark::server {

class ApiTestBase : public ::testing::Test {
 protected:
  ApiTestBase() { std::filesystem::create_directories(dir_.File("models/m")); }

  /// Opens the QuantizationService and WorkerService stubs on `address` (plaintext).
  void Connect(const std::string& address) {
    channel_ = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
    api_ = quark::v1::QuantizationService::NewStub(channel_);
    workers_ = quark::v1::internal::WorkerService::NewStub(channel_);
  }

#ifdef QUARKD_BINARY
  /// Starts the real quarkd on loopback port 0: no local workers, no /metrics, models and out allowed.
  void StartQuarkd() {
    ASSERT_TRUE(quarkd_.Start(QUARKD_BINARY,
                              {"--data-dir", dir_.File("data"), "--listen", "127.0.0.1:0", "--metrics-listen", "",
                               "--workers", "0", "--allowed-roots", dir_.File("models") + "," + dir_.File("out")},
                              dir_.File("ready.json"), dir_.File("quarkd.log")));
    Connect(quarkd_.address());
  }
#endif

  /// models/m to out with `preset` (the first preset when empty).
  quark::v1::SubmitJobRequest ValidRequest(const std::string& preset = "") const {
    quark::v1::SubmitJobRequest request;
    request.mutable_spec()->set_model_uri("file://" + dir_.File("models/m"));
    request.mutable_spec()->set_output_uri("file://" + dir_.File("out"));
    request.mutable_spec()->set_preset(preset.empty() ? AllPresets().front().name : preset);
    return request;
  }

  grpc::Status Submit(const quark::v1::SubmitJobRequest& request, quark::v1::Job* job = nullptr) {
    grpc::ClientContext context;
    quark::v1::Job ignored;
    return api_->SubmitJob(&context, request, job != nullptr ? job : &ignored);
  }

  quark::v1::Job Get(const std::string& id) {
    grpc::ClientContext context;
    quark::v1::GetJobRequest request;
    request.set_id(id);
    quark::v1::Job job;
    grpc::Status status = api_->GetJob(&context, request, &job);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return job;
  }

  /// Registers `worker_id` with one slot (the test is the worker).
  void RegisterWorker(const std::string& worker_id) {
    quark::v1::internal::RegisterRequest request;
    request.set_worker_id(worker_id);
    request.set_slots(1);
    WorkerCall<quark::v1::internal::RegisterResponse>(&quark::v1::internal::WorkerService::Stub::Register, request);
  }

  /// One lease for `worker_id`, waiting up to 5 s.
  quark::v1::internal::LeaseResponse Lease(const std::string& worker_id) {
    quark::v1::internal::LeaseRequest request;
    request.set_worker_id(worker_id);
    request.set_wait_ms(5000);
    return WorkerCall<quark::v1::internal::LeaseResponse>(&quark::v1::internal::WorkerService::Stub::Lease, request);
  }

  /// A WorkerService call expected to succeed.
  template <typename Response, typename Method, typename Request>
  Response WorkerCall(Method method, const Request& request) {
    grpc::ClientContext context;
    Response response;
    grpc::Status status = (workers_.get()->*method)(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  testing::TempDir dir_;
  testing::QuarkdProcess quarkd_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<quark::v1::QuantizationService::Stub> api_;
  std::unique_ptr<quark::v1::internal::WorkerService::Stub> workers_;
};

}  // namespace quark::server
