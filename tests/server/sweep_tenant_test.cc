// #36 sweep jobs and tenants, through the real quarkd with a tokens file: a sweep's children belong to the tenant
// that submitted it (another tenant gets NOT_FOUND for the parent and each child, and cannot cancel it), a sweep
// counts as its children against max_queued_jobs (refused whole), and the owner's cancel ends them all.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/server/api_test_base.h"
#include "tests/server/security_fixture.h"

namespace quark::server {
namespace {

namespace fs = std::filesystem;
namespace pb = quark::v1;

fs::path Fixtures() {
  const char* shared = std::getenv("QUARK_SHARED_DIR");
  return fs::path(shared != nullptr ? shared : QUARK_TEST_SOURCE_DIR "/../shared") / "fixtures";
}

class SweepTenantTest : public ApiTestBase {
 protected:
  static constexpr char kTokenA[] = "qk_tenant_a_submitter_0123456789";
  static constexpr char kTokenB[] = "qk_tenant_b_submitter_0123456789";

  void SetUp() override {
    fs::create_directories(dir_.File("models/a"));
    fs::create_directories(dir_.File("out/a"));
    fs::copy(Fixtures() / "stories260K", dir_.File("models/a/m"), fs::copy_options::recursive);
    fs::copy(Fixtures() / "eval" / "tinystories_validation_prefix.txt", dir_.File("models/a/eval.txt"));
    const std::string tokens =
        "{\"tokens\": [" + testing::TokenEntry("a-ci", kTokenA, "a", "submitter") + "," +
        testing::TokenEntry("b-ci", kTokenB, "b", "submitter") + "], \"tenants\": {\"a\": {\"model_roots\": [\"file://" +
        dir_.File("models/a") + "\"], \"output_prefixes\": [\"file://" + dir_.File("out/a") +
        "\"], \"max_queued_jobs\": 3}, \"b\": {}}}";
    testing::WriteText(dir_.File("tokens.json"), tokens);
    // No workers: every child stays queued.
    ASSERT_TRUE(quarkd_.Start(QUARKD_BINARY,
                              {"--data-dir", dir_.File("data"), "--listen", "127.0.0.1:0", "--metrics-listen", "",
                               "--workers", "0", "--allowed-roots", dir_.File("models") + "," + dir_.File("out"),
                               "--tokens-file", dir_.File("tokens.json")},
                              dir_.File("ready.json"), dir_.File("quarkd.log")));
    Connect(quarkd_.address());
  }

  grpc::Status SubmitSweep(const std::string& token, const std::vector<std::string>& schemes, pb::Job* job) {
    pb::SubmitJobRequest request;
    request.mutable_spec()->set_model_uri("file://" + dir_.File("models/a/m"));
    request.mutable_spec()->set_output_uri("file://" + dir_.File("out/a"));
    request.mutable_spec()->mutable_evaluation()->set_uri("file://" + dir_.File("models/a/eval.txt"));
    for (const std::string& scheme : schemes) request.mutable_spec()->add_sweep(scheme);
    return api_->SubmitJob(testing::Call(token).get(), request, job);
  }

  grpc::StatusCode GetAs(const std::string& token, const std::string& id, pb::Job* job = nullptr) {
    pb::GetJobRequest get;
    get.set_id(id);
    pb::Job ignored;
    return api_->GetJob(testing::Call(token).get(), get, job != nullptr ? job : &ignored).error_code();
  }
};

TEST_F(SweepTenantTest, ChildrenAreTheTenantsAndTheQuotaCountsThem) {
  pb::Job parent;
  grpc::Status submitted = SubmitSweep(kTokenA, {"w_int8_per_tensor_sym", "fp8"}, &parent);
  ASSERT_TRUE(submitted.ok()) << submitted.error_message();
  EXPECT_EQ(parent.tenant(), "a");
  ASSERT_EQ(parent.sweep().candidates_size(), 2);
  for (const auto& row : parent.sweep().candidates()) {
    pb::Job child;
    ASSERT_EQ(GetAs(kTokenA, row.job_id(), &child), grpc::StatusCode::OK);
    EXPECT_EQ(child.tenant(), "a");
    EXPECT_EQ(child.parent_id(), parent.id());
    EXPECT_EQ(child.state(), pb::JOB_STATE_QUEUED);
    EXPECT_EQ(GetAs(kTokenB, row.job_id()), grpc::StatusCode::NOT_FOUND);
  }
  EXPECT_EQ(GetAs(kTokenB, parent.id()), grpc::StatusCode::NOT_FOUND);
  pb::CancelJobRequest cancel;
  cancel.set_id(parent.id());
  pb::Job ignored;
  EXPECT_EQ(api_->CancelJob(testing::Call(kTokenB).get(), cancel, &ignored).error_code(), grpc::StatusCode::NOT_FOUND);

  // Two queued children of a's three: a sweep of two more is refused whole, naming the quota and the sweep.
  pb::Job refused;
  grpc::Status over = SubmitSweep(kTokenA, {"int8", "fp8"}, &refused);
  EXPECT_EQ(over.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(over.error_message().find("quota max_queued_jobs=3: spec.sweep's 2 child jobs would make 4 jobs queued"),
            std::string::npos)
      << over.error_message();

  // The owner's cancel ends the queued children at once, and the parent with them.
  pb::Job cancelled;
  ASSERT_TRUE(api_->CancelJob(testing::Call(kTokenA).get(), cancel, &cancelled).ok());
  EXPECT_EQ(cancelled.state(), pb::JOB_STATE_CANCELLED);
  for (const auto& row : cancelled.sweep().candidates()) {
    pb::Job child;
    ASSERT_EQ(GetAs(kTokenA, row.job_id(), &child), grpc::StatusCode::OK);
    EXPECT_EQ(child.state(), pb::JOB_STATE_CANCELLED);
  }
  // The quota is free again: the same sweep now fits.
  pb::Job again;
  EXPECT_TRUE(SubmitSweep(kTokenA, {"int8", "fp8"}, &again).ok());
}

}  // namespace
}  // namespace quark::server
