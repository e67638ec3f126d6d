// Attack test (issue #29 items 1-2): the worker confines a job to its tenant's model_roots and output_prefixes,
// not just to its own --allowed-roots. quarkd (tokens file, tenants a and b, each with its own model root and
// output prefix, all inside the worker's global root) accepts tenant a's jobs while their folders are real; then
// a's model folder is swapped for a symlink into b's model root, and a's output folder for a symlink into b's
// output prefix, before the real quark-worker (started by the test with a worker token) leases the jobs. Both
// must fail in the worker, naming a's roots, and nothing may appear under b's prefix; a's untouched job succeeds.
// Before the lease carried the tenant's roots, both swapped jobs succeeded (b's model read, b's prefix written).
#include <gtest/gtest.h>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "core/base/digest.h"
#include "quark/v1/service.grpc.pb.h"
#include "tests/worker/support/quarkd.h"

namespace quark::worker {
namespace {

namespace fs = std::filesystem;
namespace pb = quark::v1;

constexpr char kTokenA[] = "qk_tenant_roots_submitter_a_0123456789";
constexpr char kWorkerToken[] = "qk_tenant_roots_worker_0123456789";

fs::path Fixtures() {
  return fs::weakly_canonical(quark::testing::EnvOr("QUARK_SHARED_DIR", QUARK_TEST_SOURCE_DIR "/../shared")) / "fixtures";
}

// A model folder of the stories260K files (copied: hard links are refused by the stores).
void CopyModel(const fs::path& to) {
  fs::create_directories(to);
  for (const char* name : {"config.json", "model.safetensors", "tokenizer.model"}) {
    fs::copy_file(Fixtures() / "stories260K" / name, to / name);
  }
}

nlohmann::json Entry(const std::string& name, const std::string& token, const std::string& tenant,
                     const std::string& role) {
  nlohmann::json entry = {{"name", name}, {"sha256", quark::Sha256Hex(token)}, {"role", role}};
  if (!tenant.empty()) entry["tenant"] = tenant;
  return entry;
}

std::unique_ptr<grpc::ClientContext> Call(const std::string& token) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  context->AddMetadata("authorization", "Bearer " + token);
  return context;
}

std::vector<std::string> FilesUnder(const fs::path& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file()) files.push_back(it->path().string());
  }
  return files;
}

class TenantRootsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    space_ = fs::weakly_canonical(space_dir_.path());
    for (const std::string tenant : {"a", "b"}) {
      tenants_[tenant] = {{"model_roots", {"file://" + (space_ / tenant / "models").string()}},
                          {"output_prefixes", {"file://" + (space_ / tenant / "out").string()}}};
      fs::create_directories(space_ / tenant / "out");
    }
    nlohmann::json tokens = {{"tokens", {Entry("a-ci", kTokenA, "a", "submitter"),
                                         Entry("box", kWorkerToken, "", "worker")}},
                             {"tenants", tenants_}};
    quark::testing::WriteFile(space_ / "tokens.json", tokens.dump());
    quark::testing::QuarkdOptions options;
    options.workers = 0;
    options.extra_roots = {space_.string()};
    options.extra_args = {"--tokens-file", (space_ / "tokens.json").string()};
    absl::StatusOr<std::unique_ptr<quark::testing::Quarkd>> quarkd = quark::testing::Quarkd::Start(options);
    ASSERT_TRUE(quarkd.ok()) << quarkd.status();
    quarkd_ = *std::move(quarkd);
    stub_ = pb::QuantizationService::NewStub(grpc::CreateChannel(quarkd_->address(), grpc::InsecureChannelCredentials()));
  }

  std::string Submit(const std::string& model, const std::string& output, const std::string& preset) {
    pb::SubmitJobRequest request;
    request.mutable_spec()->set_model_uri("file://" + model);
    request.mutable_spec()->set_output_uri("file://" + output);
    request.mutable_spec()->set_preset(preset);
    request.mutable_spec()->set_max_attempts(1);
    request.mutable_spec()->mutable_calibration()->set_uri("file://" + (space_ / "a/models/calib.txt").string());
    request.mutable_spec()->mutable_calibration()->set_num_samples(2);
    request.mutable_spec()->mutable_calibration()->set_seq_len(32);
    pb::Job job;
    grpc::Status status = stub_->SubmitJob(Call(kTokenA).get(), request, &job);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return job.id();
  }

  pb::Job WaitForEnd(const std::string& id) {
    pb::Job job;
    for (int i = 0; i < 2400; ++i) {  // up to 240 s
      pb::GetJobRequest get;
      get.set_id(id);
      EXPECT_TRUE(stub_->GetJob(Call(kTokenA).get(), get, &job).ok());
      if (job.state() >= pb::JOB_STATE_SUCCEEDED) return job;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "job " << id << " did not end:\n" << quarkd_->Log();
    return job;
  }

  // The real quark-worker with the worker token, confined globally to the whole test space only.
  std::unique_ptr<quark::testing::Subprocess> StartWorker() {
    absl::StatusOr<std::unique_ptr<quark::testing::Subprocess>> worker = quark::testing::Subprocess::Start(
        {quark::testing::BuiltBinary("worker/quark-worker"), "--server", quarkd_->address(), "--worker-id", "box-1",
         "--data-dir", (space_ / "worker").string(), "--allowed-roots", space_.string(), "--skip-throughput-probe",
         "--lease-wait-ms", "500"},
        {std::string("QUARK_WORKER_TOKEN=") + kWorkerToken, "QUARK_THREADS=1", "OMP_NUM_THREADS=1"},
        space_dir_.path() / "worker.log");
    EXPECT_TRUE(worker.ok()) << worker.status();
    return worker.ok() ? *std::move(worker) : nullptr;
  }

  quark::testing::TempDir space_dir_;
  fs::path space_;
  nlohmann::json tenants_;
  std::unique_ptr<quark::testing::Quarkd> quarkd_;
  std::unique_ptr<pb::QuantizationService::Stub> stub_;
};

TEST_F(TenantRootsE2eTest, FoldersSwappedIntoAnotherTenantsRootsAfterSubmitFailInTheWorker) {
  CopyModel(space_ / "a/models/clean");
  CopyModel(space_ / "a/models/swapped");
  CopyModel(space_ / "a/models/writer");
  CopyModel(space_ / "b/models/private");
  quark::testing::WriteFile(space_ / "a/models/calib.txt", quark::testing::ReadFile(Fixtures() / "eval/tinystories_validation_prefix.txt"));
  fs::create_directories(space_ / "a/out/swapped");
  // Distinct presets: equal content keys would let a job follow another instead of running.
  const std::string clean = Submit((space_ / "a/models/clean").string(), (space_ / "a/out/clean").string(), "fp8");
  const std::string read_swap = Submit((space_ / "a/models/swapped").string(), (space_ / "a/out/read").string(),
                                       "w_int8_per_tensor_sym");
  const std::string write_swap = Submit((space_ / "a/models/writer").string(), (space_ / "a/out/swapped").string(),
                                        "w_int8_a_int8_per_tensor_sym");
  ASSERT_FALSE(HasFailure());

  // After submit: a's model folder leads into b's model root, a's output folder into b's output prefix.
  fs::rename(space_ / "a/models/swapped", space_ / "a/models/swapped.real");
  fs::create_directory_symlink(space_ / "b/models/private", space_ / "a/models/swapped");
  fs::remove_all(space_ / "a/out/swapped");
  fs::create_directory_symlink(space_ / "b/out", space_ / "a/out/swapped");

  std::unique_ptr<quark::testing::Subprocess> worker = StartWorker();
  ASSERT_NE(worker, nullptr);
  const pb::Job clean_job = WaitForEnd(clean);
  const pb::Job read_job = WaitForEnd(read_swap);
  const pb::Job write_job = WaitForEnd(write_swap);
  const std::string logs = quarkd_->Log() + "\n--- worker ---\n" + worker->Log();

  EXPECT_EQ(clean_job.state(), pb::JOB_STATE_SUCCEEDED) << clean_job.error() << "\n" << logs;
  EXPECT_FALSE(FilesUnder(space_ / "a/out/clean").empty());

  EXPECT_EQ(read_job.state(), pb::JOB_STATE_FAILED) << "b's model was read\n" << logs;
  EXPECT_NE(read_job.error().find("PERMISSION_DENIED"), std::string::npos) << read_job.error();
  EXPECT_NE(read_job.error().find((space_ / "a/models").string()), std::string::npos) << read_job.error();

  EXPECT_EQ(write_job.state(), pb::JOB_STATE_FAILED) << "b's prefix was written\n" << logs;
  EXPECT_NE(write_job.error().find("PERMISSION_DENIED"), std::string::npos) << write_job.error();
  EXPECT_NE(write_job.error().find((space_ / "a/out").string()), std::string::npos) << write_job.error();
  EXPECT_EQ(FilesUnder(space_ / "b/out"), std::vector<std::string>{}) << "files written into b's output prefix";
}

}  // namespace
}  // namespace quark::worker
