// Test helper: submits a job to quarkd, follows its events until it ends and returns it as GetJob has it.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <thread>
#include <string>
#include <vector>

#include "quark/v1/service.grpc.pb.h"

namespace quark::testing {

/// A job on the empty model folder <root>/models/m (created by the caller) with output <root>/out, for agents whose
/// runner ignores the model: preset int4_wo_128, `max_attempts` attempts.
inline quark::v1::SubmitJobRequest EmptyModelJob(const std::string& root, int max_attempts) {
  quark::v1::SubmitJobRequest submit;
  submit.mutable_spec()->set_model_uri("file://" + root + "/models/m");
  submit.mutable_spec()->set_output_uri("file://" + root + "/out");
  submit.mutable_spec()->set_preset("int4_wo_128");
  submit.mutable_spec()->set_max_attempts(max_attempts);
  return submit;
}

/// The job as SubmitJob answered (a failed expectation when quarkd refused it).
inline quark::v1::Job SubmitJob(quark::v1::QuantizationService::Stub& stub,
                                const quark::v1::SubmitJobRequest& request) {
  quark::v1::Job job;
  grpc::ClientContext context;
  grpc::Status status = stub.SubmitJob(&context, request, &job);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return job;
}

/// Every event WatchJob streams lands in `events`; the watch gives up after `deadline`.
inline quark::v1::Job RunJobToEnd(quark::v1::QuantizationService::Stub& stub,
                                  const quark::v1::SubmitJobRequest& request, std::vector<quark::v1::JobEvent>& events,
                                  std::chrono::seconds deadline = std::chrono::seconds(240)) {
  const quark::v1::Job job = SubmitJob(stub, request);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + deadline);
  quark::v1::WatchJobRequest watch;
  watch.set_id(job.id());
  auto reader = stub.WatchJob(&context, watch);
  quark::v1::JobEvent event;
  while (reader->Read(&event)) {
    events.push_back(event);
    if (event.has_state() && event.state() >= quark::v1::JOB_STATE_SUCCEEDED) break;
  }
  context.TryCancel();
  reader->Finish();
  quark::v1::GetJobRequest get;
  get.set_id(job.id());
  quark::v1::Job done;
  grpc::ClientContext get_context;
  EXPECT_TRUE(stub.GetJob(&get_context, get, &done).ok());
  return done;
}

/// Polls `done` every 20 ms until it is true or `limit` has passed; its last answer.
inline bool WaitUntil(const std::function<bool()>& done, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

/// The job as GetJob has it (an empty Job, and a failed expectation, when the call fails).
inline quark::v1::Job GetJob(quark::v1::QuantizationService::Stub& stub, const std::string& id) {
  grpc::ClientContext context;
  quark::v1::GetJobRequest get;
  get.set_id(id);
  quark::v1::Job job;
  EXPECT_TRUE(stub.GetJob(&context, get, &job).ok());
  return job;
}

/// The folder the job's last attempt published into under a file:// output folder: <output_dir>/<id>/attempt-<N>
/// (each attempt its own, worker/storage/publish.h).
inline std::filesystem::path AttemptFolder(const std::filesystem::path& output_dir, const quark::v1::Job& job) {
  return output_dir / job.id() / ("attempt-" + std::to_string(job.attempts_size()));
}

}  // namespace quark::testing
