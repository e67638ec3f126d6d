// Forged results (issue #29 item 5): a worker completing its lease with artifact URIs outside the job's output
// prefix (another tenant's model, file:///etc/shadow) is refused, the job fails with a clear error, and nothing of
// the forged result is shown or handed on by deduplication. Through real gRPC on loopback, the test acting as the
// rogue worker.
#include "server/scheduler/result_check.h"

#include <grpcpp/grpcpp.h>

#include <gtest/gtest.h>

#include <filesystem>

#include "quark/v1/service.grpc.pb.h"
#include "quark/v1/worker.grpc.pb.h"
#include "tests/server/api_test_base.h"

namespace quark::server {
namespace {

namespace pb = quark::v1;
namespace wpb = quark::v1::internal;

pb::Job JobWithOutput(const std::string& output_uri) {
  pb::Job job;
  job.set_id("j-1");
  job.mutable_spec()->set_output_uri(output_uri);
  return job;
}

absl::Status CheckOne(const pb::Job& job, const std::string& uri) {
  pb::JobResult result;
  result.add_artifacts()->set_uri(uri);
  return CheckResultUris(job, result);
}

TEST(ResultCheckTest, OnlyFilesUnderTheJobsOwnOutputPrefixPass) {
  const pb::Job job = JobWithOutput("file:///srv/out/tenant-a/");
  EXPECT_EQ(JobOutputPrefix(job), "file:///srv/out/tenant-a/j-1/");
  EXPECT_TRUE(CheckOne(job, "file:///srv/out/tenant-a/j-1/model.safetensors").ok());
  EXPECT_TRUE(CheckOne(job, "file:///srv/out/tenant-a/j-1/gguf/model-Q4_0.gguf").ok());
  for (const std::string forged :
       {"file:///etc/shadow", "file:///srv/models/tenant-b/model.safetensors", "file:///srv/out/tenant-a/j-2/x",
        "file:///srv/out/tenant-a/j-1", "file:///srv/out/tenant-a/j-1/", "file:///srv/out/tenant-a/j-1/../j-2/x",
        "file:///srv/out/tenant-a/j-1/./x", "file:///srv/out/tenant-a/j-1//x", "file:///srv/out/tenant-a/j-1/%2e%2e/x",
        "file:///srv/out/tenant-a/j-1/a\\..\\b", "file:///srv/out/tenant-a/j-10/x", "s3://bucket/j-1/x", ""}) {
    absl::Status status = CheckOne(job, forged);
    EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << forged;
    EXPECT_NE(status.message().find("result.artifacts[0].uri"), absl::string_view::npos) << status;
  }
  pb::JobResult manifest;
  manifest.set_manifest_uri("file:///etc/passwd");
  EXPECT_NE(CheckResultUris(job, manifest).message().find("result.manifest_uri"), absl::string_view::npos);
  // A long forged URI is quoted in 200 bytes.
  absl::Status long_one = CheckOne(job, "file:///" + std::string(1 << 20, 'a'));
  EXPECT_LT(long_one.message().size(), 600u);
}

// #33 item 2, fencing: a worker publishes into its attempt's folder; a result is taken only from the attempt whose
// lease completes (job.attempts_size()), never from another attempt's folder.
TEST(ResultCheckTest, OnlyTheCompletingAttemptsFolderPasses) {
  pb::Job job = JobWithOutput("s3://bucket/out");
  job.add_attempts();
  job.add_attempts();  // attempt 2 holds the lease
  EXPECT_TRUE(CheckOne(job, "s3://bucket/out/j-1/attempt-2/model.safetensors").ok());
  EXPECT_TRUE(CheckOne(job, "s3://bucket/out/j-1/attempt-2/gguf/model-Q4_0.gguf").ok());
  // Not attempt folders: the flat layout of workers before fencing.
  for (const std::string flat : {"s3://bucket/out/j-1/model.safetensors", "s3://bucket/out/j-1/attempt-x/a",
                                 "s3://bucket/out/j-1/attempt-/a", "s3://bucket/out/j-1/attempt-1"}) {
    EXPECT_TRUE(CheckOne(job, flat).ok()) << flat;
  }
  for (const std::string stale : {"s3://bucket/out/j-1/attempt-1/model.safetensors", "s3://bucket/out/j-1/attempt-3/a",
                                  "s3://bucket/out/j-1/attempt-0/a"}) {
    absl::Status status = CheckOne(job, stale);
    EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << stale;
    EXPECT_NE(status.message().find("result.artifacts[0].uri"), absl::string_view::npos) << status;
    EXPECT_NE(status.message().find("but the completing lease is attempt 2's"), absl::string_view::npos) << status;
  }
  pb::JobResult manifest;
  manifest.set_manifest_uri("s3://bucket/out/j-1/attempt-1/manifest.json");
  EXPECT_NE(CheckResultUris(job, manifest).message().find("result.manifest_uri: \"s3://bucket/out/j-1/attempt-1/"
                                                          "manifest.json\" is in attempt 1's folder"),
            absl::string_view::npos)
      << CheckResultUris(job, manifest);
}

class ForgedResultTest : public ApiTestBase {
 protected:
  void SetUp() override {
    StartQuarkd();
    RegisterWorker("rogue");
  }

  pb::Job Submit() {
    pb::Job job;
    grpc::Status status = ApiTestBase::Submit(ValidRequest("w_int8_per_tensor_sym"), &job);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return job;
  }

  wpb::LeaseResponse Lease() { return ApiTestBase::Lease("rogue"); }

  grpc::Status Complete(const std::string& lease_id, const std::string& artifact_uri) {
    grpc::ClientContext context;
    wpb::CompleteRequest request;
    request.set_lease_id(lease_id);
    request.set_success(true);
    pb::Artifact* artifact = request.mutable_result()->add_artifacts();
    artifact->set_uri(artifact_uri);
    artifact->set_size_bytes(1234);
    wpb::CompleteResponse response;
    return workers_->Complete(&context, request, &response);
  }

};

TEST_F(ForgedResultTest, ACompletionNamingFilesOutsideTheOutputPrefixIsRefusedAndTheJobFails) {
  pb::Job job = Submit();
  wpb::LeaseResponse lease = Lease();
  ASSERT_EQ(lease.job().id(), job.id());
  grpc::Status refused = Complete(lease.lease_id(), "file:///etc/shadow");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::PERMISSION_DENIED) << refused.error_message();
  EXPECT_NE(refused.error_message().find("result.artifacts[0].uri: \"file:///etc/shadow\" is not under the job's "
                                         "output prefix"),
            std::string::npos)
      << refused.error_message();
  pb::Job failed = Get(job.id());
  EXPECT_EQ(failed.state(), pb::JOB_STATE_FAILED);
  EXPECT_NE(failed.error().find("completion refused: worker rogue reported a result outside the job's output prefix"),
            std::string::npos)
      << failed.error();
  EXPECT_EQ(failed.result().artifacts_size(), 0) << "nothing of the forged result is shown";

  // The same job again is not deduplicated from the failed one: it queues and its honest result is taken.
  pb::Job again = Submit();
  EXPECT_EQ(again.state(), pb::JOB_STATE_QUEUED);
  EXPECT_TRUE(again.deduplicated_from().empty());
  lease = Lease();
  ASSERT_EQ(lease.job().id(), again.id());
  const std::string honest = "file://" + dir_.File("out") + "/" + again.id() + "/model.safetensors";
  grpc::Status taken = Complete(lease.lease_id(), honest);
  EXPECT_TRUE(taken.ok()) << taken.error_message();
  pb::Job succeeded = Get(again.id());
  EXPECT_EQ(succeeded.state(), pb::JOB_STATE_SUCCEEDED);
  ASSERT_EQ(succeeded.result().artifacts_size(), 1);
  EXPECT_EQ(succeeded.result().artifacts(0).uri(), honest);
}

}  // namespace
}  // namespace quark::server
