// Per-tenant storage credentials through the whole house: quarkd (tokens file with three tenants, two of them
// with storage keys) spawns the real quark-worker, which quantizes stories260K for each tenant with the
// calibration text read from s3:// and the export written to s3://. The s3rver knows only the three key ids
// involved (anything else is refused 403) and a proxy in front of it records the key id of every request, so
// each job is seen reading and writing with its tenant's keys, or the worker's own for the tenant without any.
// The secrets then appear nowhere: not in quarkd's log (which holds the worker's), the job, its events, the
// manifest or the published files.
#include <gtest/gtest.h>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "quark/v1/service.grpc.pb.h"
#include "tests/storage/support/s3rver.h"
#include "tests/support/require_peer.h"
#include "tests/worker/support/quarkd.h"
#include "core/base/digest.h"
#include "worker/storage/s3_object_store.h"

namespace quark::worker {
namespace {

namespace fs = std::filesystem;
namespace pb = quark::v1;

constexpr char kSecretA[] = "SECRET-A-tenant-a-never-leaves-the-lease";
constexpr char kSecretB[] = "SECRET-B-tenant-b-never-leaves-the-lease";
constexpr char kWorkerSecret[] = "SECRET-W-worker-own";
constexpr char kTokenA[] = "qk_tenant_a_submitter_credentials_0123";
constexpr char kTokenB[] = "qk_tenant_b_submitter_credentials_0123";
constexpr char kTokenC[] = "qk_tenant_c_submitter_credentials_0123";

std::string Fixtures() {
  // Canonical: ctest passes "<source>/../shared", and a tokens file refuses roots holding "..".
  const std::string shared = quark::testing::EnvOr("QUARK_SHARED_DIR", QUARK_TEST_SOURCE_DIR "/../shared");
  return (std::filesystem::weakly_canonical(shared) / "fixtures").string();
}

std::string TokenEntry(const std::string& name, const std::string& token, const std::string& tenant) {
  return nlohmann::json{{"name", name}, {"sha256", quark::Sha256Hex(token)}, {"tenant", tenant}, {"role", "submitter"}}
      .dump();
}

// Tenant a: its keys and the proxy as endpoint; b: its keys, the worker's endpoint; c: no storage keys.
std::string TokensJson(const std::string& endpoint, const std::string& fixtures) {
  nlohmann::json tenants;
  for (const std::string tenant : {"a", "b", "c"}) {
    tenants[tenant] = {{"model_roots", {"file://" + fixtures, "s3://test/" + tenant + "-in/"}},
                       {"output_prefixes", {"s3://test/" + tenant + "-out/"}}};
  }
  tenants["a"]["storage"] = {{"access_key_id", "AKIA-TENANT-A"}, {"secret_access_key", kSecretA}, {"endpoint", endpoint}};
  tenants["b"]["storage"] = {{"access_key_id", "AKIA-TENANT-B"}, {"secret_access_key", kSecretB}};
  return "{\"tokens\": [" + TokenEntry("a-ci", kTokenA, "a") + "," + TokenEntry("b-ci", kTokenB, "b") + "," +
         TokenEntry("c-ci", kTokenC, "c") + "], \"tenants\": " + tenants.dump() + "}";
}

// Key ids of the proxy's forwarded requests whose path starts with `prefix` (the proxy logs "key=ID").
std::vector<std::string> KeysFor(const std::string& log, const std::string& prefix) {
  std::vector<std::string> keys;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string verb, method, path, key;
    words >> verb >> method >> path >> key;
    if (verb == "forward" && path.rfind(prefix, 0) == 0) keys.push_back(key.substr(4));
  }
  return keys;
}

std::unique_ptr<grpc::ClientContext> Call(const std::string& token, int seconds = 10) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  context->AddMetadata("authorization", "Bearer " + token);
  return context;
}

TEST(LeaseCredentialsE2eTest, EachTenantsJobUsesItsOwnKeysAndTheSecretsStayOut) {
  const std::string fixtures = Fixtures();
  absl::StatusOr<std::unique_ptr<quark::testing::S3rver>> s3 = quark::testing::S3rver::Start(
      "test", {{"AKIA-TENANT-A", kSecretA}, {"AKIA-TENANT-B", kSecretB}, {"WORKER-OWN-KEY", kWorkerSecret}});
  if (!s3.ok() && s3.status().code() == absl::StatusCode::kFailedPrecondition) QUARK_PEER_MISSING() << s3.status();
  ASSERT_TRUE(s3.ok()) << s3.status();
  absl::StatusOr<std::unique_ptr<quark::testing::FaultProxy>> proxy =
      quark::testing::FaultProxy::Start((*s3)->endpoint(), "[]");
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  const std::string endpoint = (*proxy)->endpoint();

  storage::S3ObjectStore direct((*s3)->Config());
  const std::string calibration = quark::testing::ReadFile(fixtures + "/eval/tinystories_validation_prefix.txt");
  for (const std::string tenant : {"a", "b", "c"}) {
    ASSERT_TRUE(direct.PutBytes("s3://test/" + tenant + "-in/calib.txt", calibration).ok());
  }
  quark::testing::TempDir config;
  quark::testing::WriteFile(config.path() / "tokens.json", TokensJson(endpoint, fixtures));

  quark::testing::QuarkdOptions options;
  options.workers = 1;
  options.test_mode = "";
  options.worker_binary = "worker/quark-worker";
  options.extra_roots = {fixtures};
  // The worker's own S3 settings: the proxy and a key of its own.
  options.env = {"AWS_ENDPOINT_URL=" + endpoint, "AWS_ACCESS_KEY_ID=WORKER-OWN-KEY",
                 std::string("AWS_SECRET_ACCESS_KEY=") + kWorkerSecret, "AWS_REGION=us-east-1",
                 "QUARK_THREADS=1", "OMP_NUM_THREADS=1"};
  options.extra_args = {"--tokens-file", (config.path() / "tokens.json").string()};
  absl::StatusOr<std::unique_ptr<quark::testing::Quarkd>> quarkd = quark::testing::Quarkd::Start(options);
  ASSERT_TRUE(quarkd.ok()) << quarkd.status();
  auto stub = pb::QuantizationService::NewStub(
      grpc::CreateChannel((*quarkd)->address(), grpc::InsecureChannelCredentials()));

  struct TenantJob {
    std::string tenant;
    std::string token;
    std::string expected_key;
    pb::Job done;
    std::vector<pb::JobEvent> events;
  };
  std::vector<TenantJob> jobs = {{"a", kTokenA, "AKIA-TENANT-A", {}, {}},
                                 {"b", kTokenB, "AKIA-TENANT-B", {}, {}},
                                 {"c", kTokenC, "WORKER-OWN-KEY", {}, {}}};
  for (TenantJob& job : jobs) {
    pb::SubmitJobRequest request;
    pb::JobSpec* spec = request.mutable_spec();
    spec->set_model_uri("file://" + fixtures + "/stories260K");
    spec->set_preset("fp8");
    spec->set_output_uri("s3://test/" + job.tenant + "-out/jobs");
    spec->set_max_attempts(1);
    spec->mutable_calibration()->set_uri("s3://test/" + job.tenant + "-in/calib.txt");
    spec->mutable_calibration()->set_num_samples(2);
    spec->mutable_calibration()->set_seq_len(32);
    pb::Job submitted;
    grpc::Status status = stub->SubmitJob(Call(job.token).get(), request, &submitted);
    ASSERT_TRUE(status.ok()) << status.error_message();
    pb::WatchJobRequest watch;
    watch.set_id(submitted.id());
    auto context = Call(job.token, 240);
    auto reader = stub->WatchJob(context.get(), watch);
    pb::JobEvent event;
    while (reader->Read(&event)) {
      job.events.push_back(event);
      if (event.has_state() && event.state() >= pb::JOB_STATE_SUCCEEDED) break;
    }
    context->TryCancel();
    reader->Finish();
    pb::GetJobRequest get;
    get.set_id(submitted.id());
    ASSERT_TRUE(stub->GetJob(Call(job.token).get(), get, &job.done).ok());
    ASSERT_EQ(job.done.state(), pb::JOB_STATE_SUCCEEDED) << job.done.DebugString() << (*quarkd)->Log();
  }

  const std::string proxy_log = (*proxy)->Log();
  std::string published;  // every published file of every job, manifest included
  for (const TenantJob& job : jobs) {
    // Every request of the job (calibration read, uploads, manifest) was signed with the expected key id.
    for (const std::string prefix : {"/test/" + job.tenant + "-in/", "/test/" + job.tenant + "-out/"}) {
      std::vector<std::string> keys = KeysFor(proxy_log, prefix);
      ASSERT_FALSE(keys.empty()) << prefix << "\n" << proxy_log;
      for (const std::string& key : keys) EXPECT_EQ(key, job.expected_key) << prefix << "\n" << proxy_log;
    }
    const std::string& manifest_uri = job.done.result().manifest_uri();
    absl::StatusOr<std::string> manifest = direct.GetBytes(manifest_uri);
    ASSERT_TRUE(manifest.ok()) << manifest.status();
    const std::string folder = manifest_uri.substr(0, manifest_uri.rfind('/') + 1);
    published += *manifest;
    for (const auto& file : nlohmann::json::parse(*manifest)["files"]) {
      std::string path = file["path"].get<std::string>();
      if (path.find(".safetensors") != std::string::npos) continue;  // weights: no text to leak into
      absl::StatusOr<std::string> bytes = direct.GetBytes(folder + path);
      ASSERT_TRUE(bytes.ok()) << path << ": " << bytes.status();
      published += *bytes;
    }
  }
  // Nothing else reached the store: no request signed with a key id other than the three.
  for (const std::string& key : KeysFor(proxy_log, "/")) {
    EXPECT_TRUE(key == "AKIA-TENANT-A" || key == "AKIA-TENANT-B" || key == "WORKER-OWN-KEY") << key;
  }

  std::string events_text;
  for (const TenantJob& job : jobs) {
    events_text += job.done.DebugString();
    for (const pb::JobEvent& event : job.events) events_text += event.DebugString();
  }
  const std::string quarkd_log = (*quarkd)->Log();
  ASSERT_NE(quarkd_log.find("job="), std::string::npos) << "the worker's log lines are in quarkd's log";
  for (const char* secret : {kSecretA, kSecretB}) {
    EXPECT_EQ(quarkd_log.find(secret), std::string::npos) << secret << " in quarkd's or the worker's log";
    EXPECT_EQ(events_text.find(secret), std::string::npos) << secret << " in a job or its events";
    EXPECT_EQ(published.find(secret), std::string::npos) << secret << " in a manifest or published file";
  }
  // The worker's data folder (job temp folders, model cache) keeps no copy of the keys either.
  for (const auto& entry : fs::recursive_directory_iterator((*quarkd)->root())) {
    if (!entry.is_regular_file() || entry.file_size() > (1 << 20)) continue;
    if (entry.path().filename() == "quarkd.log") continue;
    std::string text = quark::testing::ReadFile(entry.path());
    EXPECT_EQ(text.find(kSecretA), std::string::npos) << entry.path();
    EXPECT_EQ(text.find(kSecretB), std::string::npos) << entry.path();
  }
}

}  // namespace
}  // namespace quark::worker
