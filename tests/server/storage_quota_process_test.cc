// #29 storage quota, as an attacker tries it through the real quarkd: tenant a submits and cancels jobs with large
// specs in a loop. Before the quota the store grew without bound (cancelled jobs were outside max_queued_jobs); now
// the loop stops at max_stored_bytes with RESOURCE_EXHAUSTED naming the quota and the bytes, tenant b is untouched,
// and DeleteJob (the job's tenant or an admin, finished jobs only, audited) frees the bytes again.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/config/presets.h"
#include "tests/server/quarkd_process.h"
#include "tests/server/security_fixture.h"

namespace quark::server {
namespace {

namespace pb = quark::v1;
using grpc::StatusCode;
using testing::Call;
using testing::QuarkdProcess;
using testing::TokenEntry;

constexpr char kQuotaTokenA[] = "qk_quota_tenant_a_submitter_0123";
constexpr char kQuotaTokenAViewer[] = "qk_quota_tenant_a_viewer_0123456";
constexpr char kQuotaTokenB[] = "qk_quota_tenant_b_submitter_0123";
constexpr char kQuotaTokenAdmin[] = "qk_quota_admin_0123456789abcdef";
constexpr int64_t kQuotaBytes = 1 << 20;

class StorageQuotaProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* folder : {"models/a/m", "models/b/m", "out/a", "out/b"}) {
      std::filesystem::create_directories(dir_.File(folder));
    }
    const std::string tokens = "[" + TokenEntry("a-ci", kQuotaTokenA, "a", "submitter") + "," +
                               TokenEntry("a-dashboard", kQuotaTokenAViewer, "a", "viewer") + "," +
                               TokenEntry("b-ci", kQuotaTokenB, "b", "submitter") + "," +
                               TokenEntry("ops", kQuotaTokenAdmin, "", "admin") + "]";
    testing::WriteText(dir_.File("tokens.json"),
                       "{\"tokens\": " + tokens + ", \"tenants\": {\"a\": {\"max_stored_bytes\": " +
                           std::to_string(kQuotaBytes) + "}, \"b\": {\"max_stored_bytes\": " +
                           std::to_string(kQuotaBytes) + "}}}");
    std::vector<std::string> args = {"--data-dir", dir_.File("data"), "--listen", "127.0.0.1:0", "--workers", "0",
                                     "--allowed-roots", dir_.File("models") + "," + dir_.File("out"),
                                     "--tokens-file", dir_.File("tokens.json")};
    quarkd_ = std::make_unique<QuarkdProcess>();
    ASSERT_TRUE(quarkd_->Start(QUARKD_BINARY, args, dir_.File("ready.json"), dir_.File("quarkd.log")))
        << testing::ReadText(dir_.File("quarkd.log"));
    auto channel = testing::MakeChannel(quarkd_->address());
    api_ = pb::QuantizationService::NewStub(channel);
    admin_ = pb::AdminService::NewStub(channel);
  }

  // A spec of about 16 KB: 32 labels with 250-byte keys and 256-byte values (each within the request limits).
  pb::SubmitJobRequest BigRequest(const std::string& tenant, int n) {
    pb::SubmitJobRequest request;
    request.set_request_id("r-" + std::to_string(n));
    request.mutable_spec()->set_model_uri("file://" + dir_.File("models/" + tenant + "/m"));
    request.mutable_spec()->set_output_uri("file://" + dir_.File("out/" + tenant));
    request.mutable_spec()->set_preset(AllPresets().front().name);
    for (int i = 0; i < 32; ++i) {
      std::string key = "pad" + std::to_string(i);
      key.resize(250, 'k');
      (*request.mutable_spec()->mutable_labels())[key] = std::string(256, 'a' + i % 26);
    }
    return request;
  }

  grpc::Status Submit(const std::string& token, const pb::SubmitJobRequest& request, pb::Job* job) {
    return api_->SubmitJob(Call(token).get(), request, job);
  }
  grpc::Status Cancel(const std::string& token, const std::string& id) {
    pb::CancelJobRequest request;
    request.set_id(id);
    pb::Job job;
    return api_->CancelJob(Call(token).get(), request, &job);
  }
  grpc::Status Delete(const std::string& token, const std::string& id, pb::DeleteJobResponse* response = nullptr) {
    pb::DeleteJobRequest request;
    request.set_id(id);
    pb::DeleteJobResponse ignored;
    return api_->DeleteJob(Call(token).get(), request, response ? response : &ignored);
  }

  // Submit-and-cancel until refused; returns the ids submitted and the refusal (OK when `limit` passed without one).
  grpc::Status SubmitAndCancelLoop(const std::string& token, const std::string& tenant, int first, int limit,
                                   std::vector<std::string>* ids) {
    for (int n = first; n < first + limit; ++n) {
      pb::Job job;
      grpc::Status status = Submit(token, BigRequest(tenant, n), &job);
      if (!status.ok()) return status;
      ids->push_back(job.id());
      EXPECT_TRUE(Cancel(token, job.id()).ok());
    }
    return grpc::Status::OK;
  }

  testing::TempDir dir_;
  std::unique_ptr<QuarkdProcess> quarkd_;
  std::unique_ptr<pb::QuantizationService::Stub> api_;
  std::unique_ptr<pb::AdminService::Stub> admin_;
};

TEST_F(StorageQuotaProcessTest, SubmitAndCancelLoopStopsAtTheQuotaAndDeleteJobFreesIt) {
  std::vector<std::string> ids;
  // Each round stores about 3 copies of a 16 KB spec (the row and the two state events): 1 MiB lasts ~20 rounds.
  grpc::Status refused = SubmitAndCancelLoop(kQuotaTokenA, "a", 0, 200, &ids);
  ASSERT_EQ(refused.error_code(), StatusCode::RESOURCE_EXHAUSTED) << refused.error_message() << " after "
                                                                  << ids.size() << " jobs";
  EXPECT_GE(ids.size(), 10u);
  EXPECT_LE(ids.size(), 30u);
  EXPECT_NE(refused.error_message().find("max_stored_bytes=1048576"), std::string::npos) << refused.error_message();
  EXPECT_NE(refused.error_message().find("bytes stored"), std::string::npos) << refused.error_message();
  EXPECT_NE(refused.error_message().find("more needed"), std::string::npos) << refused.error_message();
  // A repeated request id still answers its job (idempotency beats the quota).
  pb::Job again;
  ASSERT_TRUE(Submit(kQuotaTokenA, BigRequest("a", 0), &again).ok());
  EXPECT_EQ(again.id(), ids.front());
  // Tenant b has its own budget.
  pb::Job b_job;
  ASSERT_TRUE(Submit(kQuotaTokenB, BigRequest("b", 0), &b_job).ok());

  // DeleteJob: a queued job is refused, another tenant's job is NOT_FOUND, a viewer may not, the owner may.
  grpc::Status queued = Delete(kQuotaTokenB, b_job.id());
  EXPECT_EQ(queued.error_code(), StatusCode::FAILED_PRECONDITION) << queued.error_message();
  EXPECT_NE(queued.error_message().find("JOB_STATE_QUEUED"), std::string::npos) << queued.error_message();
  EXPECT_EQ(Delete(kQuotaTokenB, ids[0]).error_code(), StatusCode::NOT_FOUND);
  EXPECT_EQ(Delete(kQuotaTokenAViewer, ids[0]).error_code(), StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Delete(kQuotaTokenA, "").error_code(), StatusCode::INVALID_ARGUMENT);
  pb::DeleteJobResponse deleted;
  ASSERT_TRUE(Delete(kQuotaTokenA, ids[0], &deleted).ok());
  EXPECT_EQ(deleted.id(), ids[0]);
  EXPECT_GT(deleted.freed_bytes(), 3 * 16000);
  ASSERT_TRUE(Delete(kQuotaTokenAdmin, ids[1], &deleted).ok());  // an admin may delete any tenant's finished job
  EXPECT_EQ(Delete(kQuotaTokenA, ids[0]).error_code(), StatusCode::NOT_FOUND);
  pb::GetJobRequest get;
  get.set_id(ids[0]);
  pb::Job gone;
  EXPECT_EQ(api_->GetJob(Call(kQuotaTokenA).get(), get, &gone).error_code(), StatusCode::NOT_FOUND);

  // Two deleted rounds make room for about two more, and then the quota holds again.
  std::vector<std::string> more;
  refused = SubmitAndCancelLoop(kQuotaTokenA, "a", 1000, 50, &more);
  EXPECT_EQ(refused.error_code(), StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_GE(more.size(), 1u);
  EXPECT_LE(more.size(), 3u);

  // Every deletion and the quota refusals are in the audit log, never with a token.
  pb::ListAuditRecordsRequest audit_request;
  audit_request.set_page_size(1000);
  pb::ListAuditRecordsResponse audit;
  ASSERT_TRUE(admin_->ListAuditRecords(Call(kQuotaTokenAdmin).get(), audit_request, &audit).ok());
  int deletes = 0, quota_refusals = 0;
  for (const pb::AuditRecord& record : audit.records()) {
    EXPECT_EQ(record.DebugString().find("qk_quota"), std::string::npos) << record.DebugString();
    if (record.action() == "delete" && record.outcome() == "OK") {
      ++deletes;
      EXPECT_TRUE(record.target() == ids[0] || record.target() == ids[1]) << record.target();
      EXPECT_NE(record.detail().find("freed_bytes="), std::string::npos) << record.detail();
    }
    if (record.action() == "submit" && record.outcome() == "RESOURCE_EXHAUSTED") ++quota_refusals;
  }
  EXPECT_EQ(deletes, 2);
  EXPECT_EQ(quota_refusals, 2);
}

// The stored bytes are the store's own: a restarted quarkd refuses at once.
TEST_F(StorageQuotaProcessTest, TheQuotaHoldsAcrossARestart) {
  std::vector<std::string> ids;
  ASSERT_EQ(SubmitAndCancelLoop(kQuotaTokenA, "a", 0, 200, &ids).error_code(), StatusCode::RESOURCE_EXHAUSTED);
  quarkd_.reset();
  SetUp();
  pb::Job job;
  EXPECT_EQ(Submit(kQuotaTokenA, BigRequest("a", 500), &job).error_code(), StatusCode::RESOURCE_EXHAUSTED);
  ASSERT_TRUE(Delete(kQuotaTokenA, ids.back()).ok());
  EXPECT_TRUE(Submit(kQuotaTokenA, BigRequest("a", 501), &job).ok());
}

}  // namespace
}  // namespace quark::server
