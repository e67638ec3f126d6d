// Authentication, tenants and workers through the real quarkd with real tokens: two tenants (a, b), a viewer, an
// admin and workers. Every refusal has its code; another tenant's job is indistinguishable from a missing one;
// a worker without a token gets nothing; storage credentials reach only the worker holding the job and never
// the logs, events, jobs or metrics.
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <regex>

#include "core/config/presets.h"
#include "server/api/access_control.h"
#include "tests/server/quarkd_process.h"
#include "tests/server/security_fixture.h"

namespace quark::server {
namespace {

namespace pb = quark::v1;
namespace wpb = quark::v1::internal;
using grpc::StatusCode;
using testing::Call;
using testing::QuarkdProcess;
using testing::TokenEntry;
using testing::WaitFor;

constexpr char kTokenA[] = "qk_tenant_a_submitter_0123456789";
constexpr char kTokenAViewer[] = "qk_tenant_a_viewer_0123456789";
constexpr char kTokenB[] = "qk_tenant_b_submitter_0123456789";
constexpr char kTokenAdmin[] = "qk_admin_0123456789abcdef";
constexpr char kTokenWorker[] = "qk_remote_worker_0123456789";
constexpr char kSecretA[] = "SECRET-of-tenant-a-never-logged";
constexpr char kMetricsToken[] = "qk_metrics_scraper_0123";

class AuthProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* folder : {"models/a/m", "models/b/m", "out/a", "out/b", "creds"}) {
      std::filesystem::create_directories(dir_.File(folder));
    }
    testing::WriteText(dir_.File("tokens.json"), TokensJson(""));
    testing::WriteText(dir_.File("metrics.token"), std::string(kMetricsToken) + "\n");
    setenv("QUARK_TEST_WORKER_CREDENTIALS_DIR", dir_.File("creds").c_str(), 1);
  }
  void TearDown() override { unsetenv("QUARK_TEST_WORKER_CREDENTIALS_DIR"); }

  std::string TokensJson(const std::string& extra_token) {
    std::string tokens = "[" + TokenEntry("a-ci", kTokenA, "a", "submitter") + "," +
                         TokenEntry("a-dashboard", kTokenAViewer, "a", "viewer") + "," +
                         TokenEntry("b-ci", kTokenB, "b", "submitter") + "," +
                         TokenEntry("ops", kTokenAdmin, "", "admin") + "," +
                         TokenEntry("gpu-box", kTokenWorker, "", "worker") + extra_token + "]";
    return "{\"tokens\": " + tokens + ", \"tenants\": {" +
           "\"a\": {\"model_roots\": [\"file://" + dir_.File("models/a") + "\"], \"output_prefixes\": [\"file://" +
           dir_.File("out/a") + "\"], \"storage\": {\"access_key_id\": \"AKIA-TENANT-A\", \"secret_access_key\": \"" +
           kSecretA + "\"}}, " + "\"b\": {\"model_roots\": [\"file://" + dir_.File("models/b") +
           "\"], \"output_prefixes\": [\"file://" + dir_.File("out/b") + "\"], \"max_queued_jobs\": 2}}}";
  }

  bool StartQuarkd(int workers) {
    std::vector<std::string> args = {"--data-dir", dir_.File("data"), "--listen", "127.0.0.1:0",
                                     "--metrics-listen", "127.0.0.1:0", "--workers", std::to_string(workers),
                                     "--worker-binary", QUARK_TEST_WORKER_BINARY,
                                     "--allowed-roots", dir_.File("models") + "," + dir_.File("out"),
                                     "--heartbeat-interval-ms", "100", "--tokens-file", dir_.File("tokens.json"),
                                     "--metrics-token-file", dir_.File("metrics.token")};
    quarkd_ = std::make_unique<QuarkdProcess>();
    if (!quarkd_->Start(QUARKD_BINARY, args, dir_.File("ready.json"), dir_.File("quarkd.log"))) return false;
    auto channel = testing::MakeChannel(quarkd_->address());
    api_ = pb::QuantizationService::NewStub(channel);
    admin_ = pb::AdminService::NewStub(channel);
    workers_ = wpb::WorkerService::NewStub(channel);
    return true;
  }

  pb::SubmitJobRequest Request(const std::string& tenant, const std::string& request_id = "") {
    pb::SubmitJobRequest request;
    request.set_request_id(request_id);
    request.mutable_spec()->set_model_uri("file://" + dir_.File("models/" + tenant + "/m"));
    request.mutable_spec()->set_output_uri("file://" + dir_.File("out/" + tenant));
    request.mutable_spec()->set_preset(AllPresets().front().name);
    return request;
  }

  grpc::Status Submit(const std::string& token, const pb::SubmitJobRequest& request, pb::Job* job = nullptr) {
    pb::Job ignored;
    return api_->SubmitJob(Call(token).get(), request, job ? job : &ignored);
  }

  grpc::Status Get(const std::string& token, const std::string& id, pb::Job* job = nullptr) {
    pb::GetJobRequest request;
    request.set_id(id);
    pb::Job ignored;
    return api_->GetJob(Call(token).get(), request, job ? job : &ignored);
  }

  grpc::Status Cancel(const std::string& token, const std::string& id) {
    pb::CancelJobRequest request;
    request.set_id(id);
    pb::Job job;
    return api_->CancelJob(Call(token).get(), request, &job);
  }

  // Every event of a job (its WatchJob stream to the end), or the stream's error.
  grpc::Status Watch(const std::string& token, const std::string& id, std::vector<pb::JobEvent>* events) {
    pb::WatchJobRequest request;
    request.set_id(id);
    auto context = Call(token);
    auto reader = api_->WatchJob(context.get(), request);
    pb::JobEvent event;
    while (reader->Read(&event)) events->push_back(event);
    return reader->Finish();
  }

  std::vector<std::string> ListIds(const std::string& token) {
    pb::ListJobsRequest request;
    pb::ListJobsResponse response;
    EXPECT_TRUE(api_->ListJobs(Call(token).get(), request, &response).ok());
    std::vector<std::string> ids;
    for (const pb::Job& job : response.jobs()) ids.push_back(job.id());
    return ids;
  }

  bool WaitForState(const std::string& id, pb::JobState state) {
    return WaitFor([&] {
      pb::Job job;
      return Get(kTokenAdmin, id, &job).ok() && job.state() == state;
    });
  }

  int MetricsPort() {
    std::smatch match;
    std::string ready = testing::ReadText(dir_.File("ready.json"));
    return std::regex_search(ready, match, std::regex("\"metrics_port\": ([0-9]+)")) ? std::stoi(match[1]) : 0;
  }

  // Runs the real quark-worker agent (test mode) against quarkd; returns its exit status after at most 10 s.
  int RunRemoteWorker(const std::string& token, const std::string& log) {
    std::string command = std::string("timeout 10 ") + QUARK_AGENT_WORKER_BINARY + " --server " +
                          quarkd_->address() + " --worker-id remote-1 --test-mode noop --lease-wait-ms 200" +
                          " --data-dir " + dir_.File("remote") + " --allowed-roots " + dir_.File("models") + "," +
                          dir_.File("out") + (token.empty() ? "" : " --token " + token) + " > " + log + " 2>&1";
    int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  std::string Log() { return testing::ReadText(dir_.File("quarkd.log")); }

  testing::TempDir dir_;
  std::unique_ptr<QuarkdProcess> quarkd_;
  std::unique_ptr<pb::QuantizationService::Stub> api_;
  std::unique_ptr<pb::AdminService::Stub> admin_;
  std::unique_ptr<wpb::WorkerService::Stub> workers_;
};

TEST_F(AuthProcessTest, MissingOrUnknownTokensAndWrongRolesAreRefused) {
  ASSERT_TRUE(StartQuarkd(0)) << Log();
  pb::Job job;
  ASSERT_TRUE(Submit(kTokenA, Request("a"), &job).ok()) << Log();
  for (const std::string& token : {std::string(), std::string("qk_not_a_known_token")}) {
    EXPECT_EQ(Submit(token, Request("a")).error_code(), StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(Get(token, job.id()).error_code(), StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(Cancel(token, job.id()).error_code(), StatusCode::UNAUTHENTICATED);
    std::vector<pb::JobEvent> events;
    EXPECT_EQ(Watch(token, job.id(), &events).error_code(), StatusCode::UNAUTHENTICATED);
    pb::ListJobsResponse list;
    EXPECT_EQ(api_->ListJobs(Call(token).get(), pb::ListJobsRequest(), &list).error_code(),
              StatusCode::UNAUTHENTICATED);
    pb::ListPresetsResponse presets;
    EXPECT_EQ(api_->ListPresets(Call(token).get(), pb::ListPresetsRequest(), &presets).error_code(),
              StatusCode::UNAUTHENTICATED);
    pb::ListAuditRecordsResponse audit;
    EXPECT_EQ(admin_->ListAuditRecords(Call(token).get(), pb::ListAuditRecordsRequest(), &audit).error_code(),
              StatusCode::UNAUTHENTICATED);
    wpb::RegisterRequest reg;
    reg.set_worker_id("rogue");
    wpb::RegisterResponse registered;
    EXPECT_EQ(workers_->Register(Call(token).get(), reg, &registered).error_code(), StatusCode::UNAUTHENTICATED);
  }
  // Roles: a viewer reads but cannot submit or cancel; submitters are not admins; clients are not workers.
  EXPECT_TRUE(Get(kTokenAViewer, job.id()).ok());
  grpc::Status viewer_submit = Submit(kTokenAViewer, Request("a"));
  EXPECT_EQ(viewer_submit.error_code(), StatusCode::PERMISSION_DENIED);
  EXPECT_NE(viewer_submit.error_message().find("a-dashboard has role viewer"), std::string::npos);
  EXPECT_EQ(Cancel(kTokenAViewer, job.id()).error_code(), StatusCode::PERMISSION_DENIED);
  pb::ListAuditRecordsResponse audit;
  EXPECT_EQ(admin_->ListAuditRecords(Call(kTokenA).get(), pb::ListAuditRecordsRequest(), &audit).error_code(),
            StatusCode::PERMISSION_DENIED);
  pb::DrainWorkerRequest drain;
  drain.set_worker_id("local-0");
  pb::DrainWorkerResponse drained;
  EXPECT_EQ(admin_->DrainWorker(Call(kTokenA).get(), drain, &drained).error_code(), StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Get(kTokenWorker, job.id()).error_code(), StatusCode::PERMISSION_DENIED);
  wpb::RegisterRequest reg;
  reg.set_worker_id("client-posing-as-worker");
  wpb::RegisterResponse registered;
  EXPECT_EQ(workers_->Register(Call(kTokenAdmin).get(), reg, &registered).error_code(), StatusCode::PERMISSION_DENIED);

  // A rogue quark-worker without a token is refused at once and never gets the queued job; with a worker token
  // the same binary registers and runs it.
  EXPECT_EQ(RunRemoteWorker("", dir_.File("rogue.log")), 1);
  std::string rogue = testing::ReadText(dir_.File("rogue.log"));
  EXPECT_NE(rogue.find("missing bearer token"), std::string::npos) << rogue;
  pb::Job still;
  ASSERT_TRUE(Get(kTokenA, job.id(), &still).ok());
  EXPECT_EQ(still.state(), pb::JOB_STATE_QUEUED);
  std::thread remote([&] { RunRemoteWorker(kTokenWorker, dir_.File("remote.log")); });
  EXPECT_TRUE(WaitForState(job.id(), pb::JOB_STATE_SUCCEEDED)) << testing::ReadText(dir_.File("remote.log"));
  remote.join();
}

TEST_F(AuthProcessTest, TenantsSeeOnlyTheirJobsAndPaths) {
  ASSERT_TRUE(StartQuarkd(1)) << Log();
  pb::Job a_job, b_job;
  ASSERT_TRUE(Submit(kTokenA, Request("a", "same-request-id"), &a_job).ok()) << Log();
  ASSERT_TRUE(Submit(kTokenB, Request("b", "same-request-id"), &b_job).ok()) << Log();
  EXPECT_NE(a_job.id(), b_job.id()) << "request ids are per tenant";
  EXPECT_EQ(a_job.tenant(), "a");

  // Another tenant's job answers exactly as a job that does not exist.
  const std::string missing = "job-00000000000000000000";
  grpc::Status foreign = Get(kTokenB, a_job.id());
  grpc::Status absent = Get(kTokenB, missing);
  EXPECT_EQ(foreign.error_code(), StatusCode::NOT_FOUND);
  EXPECT_EQ(std::regex_replace(foreign.error_message(), std::regex(a_job.id()), "ID"),
            std::regex_replace(absent.error_message(), std::regex(missing), "ID"));
  EXPECT_EQ(Cancel(kTokenB, a_job.id()).error_code(), StatusCode::NOT_FOUND);
  std::vector<pb::JobEvent> events;
  EXPECT_EQ(Watch(kTokenB, a_job.id(), &events).error_code(), StatusCode::NOT_FOUND);
  EXPECT_TRUE(events.empty());
  std::vector<std::string> b_sees = ListIds(kTokenB);
  EXPECT_EQ(b_sees, std::vector<std::string>{b_job.id()});
  EXPECT_EQ(ListIds(kTokenAViewer), std::vector<std::string>{a_job.id()});
  EXPECT_EQ(ListIds(kTokenAdmin).size(), 2u);

  // Per-tenant roots and prefixes, and path tricks, each refused naming its field.
  struct Case {
    std::string field;
    std::function<void(pb::JobSpec*)> edit;
  };
  testing::WriteText(dir_.File("models/a/calib.txt"), "text");
  std::filesystem::create_hard_link(dir_.File("models/a/calib.txt"), dir_.File("models/a/calib-link.txt"));
  std::vector<Case> cases = {
      {"spec.model_uri", [&](pb::JobSpec* s) { s->set_model_uri("file://" + dir_.File("models/b/m")); }},
      {"spec.output_uri", [&](pb::JobSpec* s) { s->set_output_uri("file://" + dir_.File("out/b")); }},
      {"spec.model_uri", [&](pb::JobSpec* s) { s->set_model_uri("file://" + dir_.File("models/a/../b/m")); }},
      {"spec.model_uri", [&](pb::JobSpec* s) { s->set_model_uri("file://" + dir_.File("models/a/%2e%2e/b/m")); }},
      {"spec.output_uri", [&](pb::JobSpec* s) { s->set_output_uri("s3://bucket//etc/passwd"); }},
      {"spec.calibration.uri",
       [&](pb::JobSpec* s) { s->mutable_calibration()->set_uri("file://" + dir_.File("models/a/calib-link.txt")); }},
  };
  for (const Case& c : cases) {
    pb::SubmitJobRequest request = Request("a");
    c.edit(request.mutable_spec());
    grpc::Status status = Submit(kTokenA, request);
    EXPECT_EQ(status.error_code(), StatusCode::PERMISSION_DENIED) << c.field << ": " << status.error_message();
    EXPECT_EQ(status.error_message().rfind(c.field + ":", 0), 0u) << status.error_message();
  }

  // Storage credentials: the worker holding a's job got a's key id; b has none configured.
  ASSERT_TRUE(WaitForState(a_job.id(), pb::JOB_STATE_SUCCEEDED)) << Log();
  ASSERT_TRUE(WaitForState(b_job.id(), pb::JOB_STATE_SUCCEEDED)) << Log();
  EXPECT_EQ(testing::ReadText(dir_.File("creds/" + a_job.id())), "AKIA-TENANT-A\n");
  EXPECT_EQ(testing::ReadText(dir_.File("creds/" + b_job.id())), "-\n");

  // No secret and no token anywhere a person or a scraper could read: log, events, jobs, metrics.
  events.clear();
  ASSERT_TRUE(Watch(kTokenA, a_job.id(), &events).ok());
  std::string seen = Log();
  for (const pb::JobEvent& event : events) seen += event.DebugString();
  pb::Job final_job;
  ASSERT_TRUE(Get(kTokenA, a_job.id(), &final_job).ok());
  seen += final_job.DebugString();
  httplib::Client metrics("127.0.0.1", MetricsPort());
  auto refused = metrics.Get("/metrics");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 401);
  auto scraped = metrics.Get("/metrics", {{"Authorization", std::string("Bearer ") + kMetricsToken}});
  ASSERT_TRUE(scraped);
  ASSERT_EQ(scraped->status, 200);
  EXPECT_NE(scraped->body.find("quarkd_tenant_jobs_submitted_total{tenant=\"a\"} 1"), std::string::npos);
  EXPECT_NE(scraped->body.find("quarkd_auth_denied_total"), std::string::npos);
  seen += scraped->body;
  for (const char* secret : {kSecretA, kTokenA, kTokenAViewer, kTokenB, kTokenAdmin, kTokenWorker, kMetricsToken}) {
    EXPECT_EQ(seen.find(secret), std::string::npos) << secret << " leaked";
  }
  EXPECT_EQ(seen.find(Sha256Hex(kTokenA)), std::string::npos);

  // The audit log: who submitted what, the refusals by field, admins only.
  pb::ListAuditRecordsResponse audit;
  ASSERT_TRUE(admin_->ListAuditRecords(Call(kTokenAdmin).get(), pb::ListAuditRecordsRequest(), &audit).ok());
  int submits = 0, denied = 0;
  for (const pb::AuditRecord& record : audit.records()) {
    if (record.action() == "submit" && record.outcome() == "OK") ++submits;
    if (record.action() == "submit" && record.outcome() == "PERMISSION_DENIED") ++denied;
  }
  EXPECT_EQ(submits, 2);
  EXPECT_EQ(denied, static_cast<int>(cases.size()));
  EXPECT_EQ(audit.records(0).principal(), "a-ci");
  EXPECT_EQ(audit.records(0).target(), a_job.id());
}

// #29 item 4 (audit): every refused call leaves a record with its reason and never the token — role refusals
// under the caller's name, bad submissions, worker-id impersonation, and unauthenticated calls (at most 60 one by
// one a minute: a flood from anyone who reaches the port cannot push the log's older records out).
TEST_F(AuthProcessTest, RefusedCallsAreAuditedWithTheirReasonAndUnauthenticatedOnesAreBounded) {
  ASSERT_TRUE(StartQuarkd(0)) << Log();
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(Submit(i % 2 == 0 ? "" : "qk_not_a_known_token_flood", Request("a")).error_code(),
              StatusCode::UNAUTHENTICATED);
  }
  pb::ListAuditRecordsResponse refused;
  EXPECT_EQ(admin_->ListAuditRecords(Call(kTokenAViewer).get(), pb::ListAuditRecordsRequest(), &refused).error_code(),
            StatusCode::PERMISSION_DENIED);
  pb::DrainWorkerRequest drain;
  drain.set_worker_id("local-0");
  pb::DrainWorkerResponse drained;
  EXPECT_EQ(admin_->DrainWorker(Call(kTokenB).get(), drain, &drained).error_code(), StatusCode::PERMISSION_DENIED);
  pb::SubmitJobRequest bad = Request("a");
  bad.mutable_spec()->set_preset("no-such-preset");
  EXPECT_EQ(Submit(kTokenA, bad).error_code(), StatusCode::INVALID_ARGUMENT);
  wpb::RegisterRequest squat;
  squat.set_worker_id("local-0");
  wpb::RegisterResponse registered;
  EXPECT_EQ(workers_->Register(Call(kTokenWorker).get(), squat, &registered).error_code(),
            StatusCode::PERMISSION_DENIED);

  pb::ListAuditRecordsRequest request;
  request.set_page_size(1000);
  pb::ListAuditRecordsResponse audit;
  ASSERT_TRUE(admin_->ListAuditRecords(Call(kTokenAdmin).get(), request, &audit).ok());
  std::map<std::string, int> count;  // "principal action outcome"
  for (const pb::AuditRecord& record : audit.records()) {
    ++count[record.principal() + " " + record.action() + " " + record.outcome()];
    for (const char* secret : {kTokenA, kTokenAViewer, kTokenB, kTokenWorker, "qk_not_a_known_token_flood"}) {
      EXPECT_EQ(record.DebugString().find(secret), std::string::npos) << record.DebugString();
    }
    if (record.principal() == "unauthenticated") EXPECT_NE(record.detail().find("peer=ipv4:127.0.0.1"), std::string::npos);
    if (record.outcome() == "INVALID_ARGUMENT") EXPECT_NE(record.detail().find("no-such-preset"), std::string::npos);
  }
  EXPECT_EQ(count["unauthenticated submit UNAUTHENTICATED"], kUnauthenticatedAuditsPerMinute) << "bounded per minute";
  EXPECT_EQ(count["a-dashboard list_audit_records PERMISSION_DENIED"], 1);
  EXPECT_EQ(count["b-ci drain_worker PERMISSION_DENIED"], 1);
  EXPECT_EQ(count["a-ci submit INVALID_ARGUMENT"], 1);
  EXPECT_EQ(count["gpu-box worker_identity PERMISSION_DENIED"], 1);
}

// Issue #29 item 4: a worker token registering "local-0" right after quarkd started locked the real local worker out
// (it crash-looped: "worker_id local-0 belongs to another credential") and then leased every job with its tenant's
// storage keys. Local ids are reserved from the start: the squat is refused, and the local worker runs the job.
TEST_F(AuthProcessTest, ARemoteWorkerCannotSquatALocalWorkerId) {
  ASSERT_TRUE(StartQuarkd(1)) << Log();
  for (const char* id : {"local-0", "local-1"}) {
    wpb::RegisterRequest reg;
    reg.set_worker_id(id);
    reg.set_slots(4);
    wpb::RegisterResponse registered;
    grpc::Status squat = workers_->Register(Call(kTokenWorker).get(), reg, &registered);
    EXPECT_EQ(squat.error_code(), StatusCode::PERMISSION_DENIED) << id;
    EXPECT_NE(squat.error_message().find("is reserved for quarkd's local workers"), std::string::npos)
        << squat.error_message();
    wpb::LeaseRequest lease;
    lease.set_worker_id(id);
    lease.set_wait_ms(0);
    wpb::LeaseResponse leased;
    EXPECT_EQ(workers_->Lease(Call(kTokenWorker).get(), lease, &leased).error_code(), StatusCode::PERMISSION_DENIED);
  }
  pb::Job job;
  ASSERT_TRUE(Submit(kTokenA, Request("a"), &job).ok());
  ASSERT_TRUE(WaitForState(job.id(), pb::JOB_STATE_SUCCEEDED)) << Log();
  pb::Job done;
  ASSERT_TRUE(Get(kTokenAdmin, job.id(), &done).ok());
  EXPECT_EQ(done.worker_id().rfind("local-0-", 0), 0u) << done.worker_id();
  EXPECT_EQ(done.worker_id().size(), std::string("local-0-").size() + 16) << "a per-start random suffix";
}

// Issue #29 item 6: ValidateConfig with estimate read the evaluation file's size whatever its root: tenant a learnt
// whether a file of tenant b exists and, from the evaluate phase's seconds, its size. Every data URI of the call is
// now held to the caller's tenant's roots.
TEST_F(AuthProcessTest, ValidateConfigDoesNotReadAnotherTenantsFiles) {
  testing::WriteText(dir_.File("models/b/secret.txt"), std::string(100000, 'b'));
  ASSERT_TRUE(StartQuarkd(0)) << Log();
  for (const std::string field : {"evaluation.uri", "calibration.uri"}) {
    pb::ValidateConfigRequest request;
    request.set_model_uri("file://" + dir_.File("models/a/m"));
    request.set_preset(AllPresets().front().name);
    request.set_estimate(true);
    const std::string uri = "file://" + dir_.File("models/b/secret.txt");
    (field == "evaluation.uri" ? request.mutable_evaluation()->mutable_uri()
                               : request.mutable_calibration()->mutable_uri())->assign(uri);
    pb::ValidateConfigResponse response;
    grpc::Status status = api_->ValidateConfig(Call(kTokenAViewer).get(), request, &response);
    EXPECT_EQ(status.error_code(), StatusCode::PERMISSION_DENIED) << field << ": " << response.DebugString();
    EXPECT_NE(status.error_message().find(field + ": "), std::string::npos) << status.error_message();
    EXPECT_NE(status.error_message().find("tenant a's model_roots"), std::string::npos) << status.error_message();
    // Tenant b itself may.
    pb::ValidateConfigRequest own = request;
    own.set_model_uri("file://" + dir_.File("models/b/m"));
    EXPECT_TRUE(api_->ValidateConfig(Call(kTokenB).get(), own, &response).ok()) << field;
  }
}

// Issue #29 item 11: a token removed from the tokens file kept its open WatchJob stream. A reload now authorizes
// every open stream again: the removed token's ends UNAUTHENTICATED (quarkd looks at the file about once a second).
TEST_F(AuthProcessTest, ARemovedTokenLosesItsOpenWatchStream) {
  ASSERT_TRUE(StartQuarkd(0)) << Log();
  pb::Job job;
  ASSERT_TRUE(Submit(kTokenA, Request("a"), &job).ok());  // no worker: it stays queued, so the stream stays open
  auto watch = [&](const std::string& token, std::unique_ptr<grpc::ClientContext>* context) {
    *context = Call(token);
    (*context)->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    pb::WatchJobRequest request;
    request.set_id(job.id());
    auto reader = api_->WatchJob(context->get(), request);
    pb::JobEvent event;
    EXPECT_TRUE(reader->Read(&event));  // the QUEUED event: the stream is open
    return reader;
  };
  std::unique_ptr<grpc::ClientContext> revoked_context, kept_context;
  auto revoked = watch(kTokenAViewer, &revoked_context);
  auto kept = watch(kTokenA, &kept_context);
  std::string tokens = TokensJson("");
  const std::string entry = TokenEntry("a-dashboard", kTokenAViewer, "a", "viewer") + ",";
  ASSERT_NE(tokens.find(entry), std::string::npos);
  tokens.erase(tokens.find(entry), entry.size());
  testing::WriteText(dir_.File("tokens.json"), tokens);
  pb::JobEvent event;
  while (revoked->Read(&event)) {
  }
  grpc::Status ended = revoked->Finish();
  EXPECT_EQ(ended.error_code(), StatusCode::UNAUTHENTICATED) << ended.error_message();
  // The token still in the file keeps its stream until the job ends.
  ASSERT_TRUE(Cancel(kTokenA, job.id()).ok());
  while (kept->Read(&event)) {
  }
  EXPECT_TRUE(kept->Finish().ok());
  EXPECT_EQ(event.state(), pb::JOB_STATE_CANCELLED);
}

TEST_F(AuthProcessTest, QuotasDrainingAndTokenReload) {
  ASSERT_TRUE(StartQuarkd(1)) << Log();
  pb::DrainWorkerRequest drain;
  drain.set_worker_id("local-0");
  pb::DrainWorkerResponse drained;
  ASSERT_TRUE(admin_->DrainWorker(Call(kTokenAdmin).get(), drain, &drained).ok());
  pb::Job first, second;
  ASSERT_TRUE(Submit(kTokenB, Request("b"), &first).ok());
  ASSERT_TRUE(Submit(kTokenB, Request("b"), &second).ok());
  grpc::Status over = Submit(kTokenB, Request("b"));
  EXPECT_EQ(over.error_code(), StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(over.error_message().find("quota max_queued_jobs=2"), std::string::npos) << over.error_message();
  EXPECT_TRUE(Submit(kTokenA, Request("a")).ok()) << "quotas are per tenant";
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // a drained worker must not take any of them
  EXPECT_TRUE(WaitForState(first.id(), pb::JOB_STATE_QUEUED));
  ASSERT_TRUE(admin_->ResumeWorker(Call(kTokenAdmin).get(), drain, &drained).ok());
  EXPECT_TRUE(WaitForState(second.id(), pb::JOB_STATE_SUCCEEDED)) << Log();

  // A token added to the file works within seconds, without a restart; a removed one stops working.
  const std::string fresh = "qk_added_while_running_0123";
  testing::WriteText(dir_.File("tokens.json"), TokensJson("," + TokenEntry("c-new", fresh, "c", "submitter")));
  pb::ListPresetsResponse presets;
  EXPECT_TRUE(WaitFor([&] { return api_->ListPresets(Call(fresh).get(), pb::ListPresetsRequest(), &presets).ok(); }))
      << Log();
  testing::WriteText(dir_.File("tokens.json"), TokensJson(""));
  EXPECT_TRUE(WaitFor([&] {
    return api_->ListPresets(Call(fresh).get(), pb::ListPresetsRequest(), &presets).error_code() ==
           StatusCode::UNAUTHENTICATED;
  }));
}

}  // namespace
}  // namespace quark::server
