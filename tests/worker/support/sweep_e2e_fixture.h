// The fixture of the #36 sweep tests through the whole house (sweep_e2e_test.cc, sweep_split_e2e_test.cc): a real
// quarkd over loopback gRPC with pool quark-workers, remote quark-workers started here, and the requests and waits the
// tests share.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "quark/v1/service.grpc.pb.h"
#include "tests/storage/support/subprocess.h"
#include "tests/worker/support/quarkd.h"
#include "tests/worker/support/run_job.h"

namespace quark::worker::sweep_e2e {

namespace fs = std::filesystem;
using quark::testing::Subprocess;

inline std::string Fixtures() {
  return quark::testing::EnvOr("QUARK_SHARED_DIR", QUARK_TEST_SOURCE_DIR "/../shared") + "/fixtures";
}

class SweepE2eTest : public ::testing::Test {
 protected:
  void Start(int local_workers, const std::string& test_mode, const std::string& worker_binary,
             const std::vector<std::string>& extra_args = {}) {
    quark::testing::QuarkdOptions options;
    options.extra_args = extra_args;
    options.workers = local_workers;
    options.test_mode = test_mode;
    options.worker_binary = worker_binary;
    options.extra_roots = {Fixtures()};
    options.env = {"QUARK_THREADS=1", "OMP_NUM_THREADS=1"};
    auto quarkd = quark::testing::Quarkd::Start(options);
    ASSERT_TRUE(quarkd.ok()) << quarkd.status();
    quarkd_ = *std::move(quarkd);
    stub_ = quark::v1::QuantizationService::NewStub(
        grpc::CreateChannel(quarkd_->address(), grpc::InsecureChannelCredentials()));
  }

  // A quark-worker of its own (not quarkd's pool), connecting to quarkd as a remote machine's would.
  std::unique_ptr<Subprocess> StartRemoteWorker(const std::string& name) {
    std::vector<std::string> argv = {quark::testing::BuiltBinary("worker/quark-worker"),
                                     "--server", quarkd_->address(),
                                     "--worker-id", name,
                                     "--data-dir", (quarkd_->root() / name).string(),
                                     "--allowed-roots", quarkd_->root().string() + "," + Fixtures(),
                                     "--skip-throughput-probe",
                                     "--lease-wait-ms", "500"};
    absl::StatusOr<std::unique_ptr<Subprocess>> worker = Subprocess::Start(
        argv, {"QUARK_THREADS=1", "OMP_NUM_THREADS=1"}, quarkd_->root() / (name + ".log"));
    EXPECT_TRUE(worker.ok()) << worker.status();
    return worker.ok() ? *std::move(worker) : nullptr;
  }

  // quarkd with one pool quark-worker, and a remote one ("remote-1") registered with it; null when it did not start.
  std::unique_ptr<Subprocess> StartPoolAndRemoteWorker() {
    Start(1, "", "worker/quark-worker");
    if (quarkd_ == nullptr) return nullptr;
    std::unique_ptr<Subprocess> remote = StartRemoteWorker("remote-1");
    if (remote == nullptr) return nullptr;
    const bool registered =
        quarkd_->process().WaitForLine(std::regex("worker=remote-1 registered"), std::chrono::seconds(60)).ok();
    return registered ? std::move(remote) : nullptr;
  }

  // The evaluation quarkctl has no flags for (2 windows of 128 tokens, KLD) in a job file.
  std::string JobFile() const {
    const fs::path path = quarkd_->root() / "sweep.json";
    std::ofstream(path) << R"({"model_uri": "file://)" << Fixtures() << R"(/stories260K", "output_uri": "file://)"
                        << (quarkd_->root() / "out").string() << R"(", "max_attempts": 1, "evaluation": {"uri": "file://)"
                        << Fixtures() << R"(/eval/tinystories_validation_prefix.txt", "seq_len": 128, "max_windows": 2,
                        "kld": true}})";
    return path.string();
  }

  quark::v1::SubmitJobRequest SweepRequest(const std::vector<std::string>& schemes) const {
    quark::v1::SubmitJobRequest request;
    quark::v1::JobSpec* spec = request.mutable_spec();
    spec->set_model_uri("file://" + Fixtures() + "/stories260K");
    spec->set_output_uri("file://" + (quarkd_->root() / "out").string());
    spec->mutable_evaluation()->set_uri("file://" + Fixtures() + "/eval/tinystories_validation_prefix.txt");
    for (const std::string& scheme : schemes) spec->add_sweep(scheme);
    return request;
  }

  // `request` with other candidates.
  static quark::v1::SubmitJobRequest SweepRequestLike(quark::v1::SubmitJobRequest request,
                                                      const std::vector<std::string>& schemes) {
    request.mutable_spec()->clear_sweep();
    for (const std::string& scheme : schemes) request.mutable_spec()->add_sweep(scheme);
    return request;
  }

  grpc::Status Submit(const quark::v1::SubmitJobRequest& request, quark::v1::Job* job) {
    grpc::ClientContext context;
    return stub_->SubmitJob(&context, request, job);
  }

  quark::v1::Job Get(const std::string& id) { return quark::testing::GetJob(*stub_, id); }

  // Submits `request`, expects INVALID_ARGUMENT and returns the message (which names the field).
  std::string Refusal(const quark::v1::SubmitJobRequest& request) {
    quark::v1::Job job;
    grpc::Status status = Submit(request, &job);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    return status.error_message();
  }

  // The finished job's log lines, replayed from quarkd's durable event log.
  std::vector<std::string> Logs(const std::string& id) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    quark::v1::WatchJobRequest watch;
    watch.set_id(id);
    auto reader = stub_->WatchJob(&context, watch);
    std::vector<std::string> logs;
    quark::v1::JobEvent event;
    while (reader->Read(&event)) {
      if (event.event_case() == quark::v1::JobEvent::kLog) logs.push_back(event.log());
    }
    EXPECT_TRUE(reader->Finish().ok());
    return logs;
  }

  // Submits `request` and waits for its end.
  quark::v1::Job RunToEnd(const quark::v1::SubmitJobRequest& request) {
    quark::v1::Job job;
    grpc::Status status = Submit(request, &job);
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_TRUE(quark::testing::WaitUntil(
        [&] {
          const quark::v1::JobState s = Get(job.id()).state();
          return s != quark::v1::JOB_STATE_RUNNING && s != quark::v1::JOB_STATE_QUEUED;
        },
        std::chrono::seconds(400)))
        << quarkd_->Log();
    return Get(job.id());
  }

  std::unique_ptr<quark::testing::Quarkd> quarkd_;
  std::unique_ptr<quark::v1::QuantizationService::Stub> stub_;
};

inline std::string JobIdIn(const std::string& text) {
  std::smatch match;
  return std::regex_search(text, match, std::regex("(job-[0-9a-f]{32})")) ? match[1].str() : "";
}

}  // namespace quark::worker::sweep_e2e
