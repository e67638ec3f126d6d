// Signed provenance end to end (#34): quarkd --signing-key hands the key to its real quark-worker, which signs the
// manifest of a tiny stories260K job; `quarkctl key` prints quarkd's public key and `quarkctl verify` accepts the
// published artifact, then names a flipped artifact byte, an edited manifest and a manifest signed by another key.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "client/output.h"
#include "quark/v1/service.grpc.pb.h"
#include "quark/version.h"
#include "tests/client/run_ctl.h"
#include "tests/worker/support/quarkd.h"

namespace quark::client {
namespace {
namespace fs = std::filesystem;

std::string Fixtures() {
  return quark::testing::EnvOr("QUARK_SHARED_DIR", QUARK_TEST_SOURCE_DIR "/../shared") + "/fixtures";
}

bool GenerateKey(const fs::path& pem) {
  return std::system(("openssl genpkey -algorithm ed25519 -out " + pem.string() + " 2>/dev/null").c_str()) == 0;
}

class QuarkctlProvenanceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(GenerateKey(keys_.path() / "signing.pem") && GenerateKey(keys_.path() / "other.pem"));
    ASSERT_EQ(std::system(("openssl pkey -in " + (keys_.path() / "other.pem").string() + " -pubout -out " +
                           (keys_.path() / "other.pub").string()).c_str()), 0);
    quark::testing::QuarkdOptions options;
    options.workers = 1;
    options.test_mode = "";
    options.worker_binary = "worker/quark-worker";
    options.extra_roots = {Fixtures()};
    options.extra_args = {"--signing-key", (keys_.path() / "signing.pem").string()};
    absl::StatusOr<std::unique_ptr<quark::testing::Quarkd>> quarkd = quark::testing::Quarkd::Start(options);
    ASSERT_TRUE(quarkd.ok()) << quarkd.status();
    quarkd_ = std::move(*quarkd);
  }

  // Runs the tiny job (ptpc_fp8: per-channel fp8 weights, dynamic activations, no calibration data) to its end.
  quark::v1::Job RunTinyJob() {
    auto stub = quark::v1::QuantizationService::NewStub(
        grpc::CreateChannel(quarkd_->address(), grpc::InsecureChannelCredentials()));
    quark::v1::SubmitJobRequest request;
    request.mutable_spec()->set_model_uri("file://" + Fixtures() + "/stories260K");
    request.mutable_spec()->set_preset("ptpc_fp8");
    request.mutable_spec()->set_output_uri("file://" + quarkd_->root().string() + "/out");
    request.mutable_spec()->set_max_attempts(1);
    quark::v1::Job job;
    grpc::ClientContext submit;
    EXPECT_TRUE(stub->SubmitJob(&submit, request, &job).ok());
    CtlRun watch = RunCtl({"--server", quarkd_->address(), "-o", "json", "watch", job.id()});
    EXPECT_EQ(watch.code, kExitOk) << watch.out << watch.err << quarkd_->Log();
    grpc::ClientContext get;
    quark::v1::GetJobRequest get_request;
    get_request.set_id(job.id());
    EXPECT_TRUE(stub->GetJob(&get, get_request, &job).ok());
    return job;
  }

  CtlRun Verify(const std::string& manifest_uri, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--server", quarkd_->address(), "verify", manifest_uri};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunCtl(args);
  }

  quark::testing::TempDir keys_;
  std::unique_ptr<quark::testing::Quarkd> quarkd_;
};

TEST_F(QuarkctlProvenanceTest, SignedManifestVerifiesAndTamperingIsNamed) {
  CtlRun key = RunCtl({"--server", quarkd_->address(), "-o", "json", "key"});
  ASSERT_EQ(key.code, kExitOk) << key.err;
  const nlohmann::json served = nlohmann::json::parse(key.out);
  EXPECT_EQ(served["algorithm"], "ed25519");
  const std::string key_id = served["key_id"];

  const quark::v1::Job job = RunTinyJob();
  ASSERT_EQ(job.state(), quark::v1::JOB_STATE_SUCCEEDED) << job.DebugString() << quarkd_->Log();
  const std::string manifest_uri = job.result().manifest_uri();
  const fs::path manifest_path = manifest_uri.substr(std::string("file://").size());
  const nlohmann::json manifest = nlohmann::json::parse(quark::testing::ReadFile(manifest_path));
  EXPECT_EQ(manifest["signature"]["key_id"], key_id);
  EXPECT_EQ(manifest["engine_version"], QUARK_ENGINE_VERSION);
  EXPECT_EQ(manifest["content_key"], job.content_key());
  EXPECT_EQ(manifest["worker"]["id"], job.worker_id());
  EXPECT_EQ(manifest["worker"]["attempt"], 1);
  EXPECT_EQ(manifest["worker"]["devices"], nlohmann::json::array({"cpu"}));

  CtlRun verified = Verify(manifest_uri);
  EXPECT_EQ(verified.code, kExitOk) << verified.out << verified.err;
  EXPECT_NE(verified.out.find("signed by key " + key_id), std::string::npos) << verified.out;

  // Another trusted key: the manifest's key is named by its id.
  CtlRun unknown = Verify(manifest_uri, {"--key", (keys_.path() / "other.pub").string()});
  EXPECT_EQ(unknown.code, kExitNotVerified);
  EXPECT_NE(unknown.err.find("signed by key " + key_id + ", which is not a trusted key"), std::string::npos)
      << unknown.err;

  // A flipped byte in the weights.
  const fs::path weights = manifest_path.parent_path() / "model.safetensors";
  std::string bytes = quark::testing::ReadFile(weights);
  ASSERT_GT(bytes.size(), 1000u);
  bytes[bytes.size() / 2] ^= 0x40;
  quark::testing::WriteFile(weights, bytes);
  CtlRun flipped = Verify(manifest_uri);
  EXPECT_EQ(flipped.code, kExitNotVerified);
  EXPECT_NE(flipped.out.find("NOT VERIFIED"), std::string::npos);
  EXPECT_NE(flipped.err.find("model.safetensors: sha256 "), std::string::npos) << flipped.err;
  EXPECT_EQ(flipped.err.find("signature"), std::string::npos) << "the manifest itself is intact: " << flipped.err;
  bytes[bytes.size() / 2] ^= 0x40;
  quark::testing::WriteFile(weights, bytes);
  ASSERT_EQ(Verify(manifest_uri).code, kExitOk);

  // An edited manifest (a better perplexity than measured would be the same): the signature fails.
  nlohmann::json edited = manifest;
  edited["model_uri"] = "file:///somewhere/else";
  quark::testing::WriteFile(manifest_path, edited.dump(2));
  CtlRun tampered = Verify(manifest_uri, {"-o", "json"});
  EXPECT_EQ(tampered.code, kExitNotVerified);
  EXPECT_NE(tampered.err.find("signature: does not match the manifest's content for key " + key_id),
            std::string::npos) << tampered.err;
  EXPECT_EQ(nlohmann::json::parse(tampered.out)["verified"], false);
}

TEST(QuarkctlKeyTest, QuarkdWithoutASigningKeyAnswersNotFound) {
  quark::testing::QuarkdOptions options;
  absl::StatusOr<std::unique_ptr<quark::testing::Quarkd>> quarkd = quark::testing::Quarkd::Start(options);
  ASSERT_TRUE(quarkd.ok()) << quarkd.status();
  CtlRun key = RunCtl({"--server", (*quarkd)->address(), "key"});
  EXPECT_EQ(key.code, kExitRpcError);
  EXPECT_NE(key.err.find("NOT_FOUND: signing key: quarkd was started without --signing-key"), std::string::npos)
      << key.err;
  CtlRun verify = RunCtl({"--server", (*quarkd)->address(), "verify", "file:///nowhere/manifest.json"});
  EXPECT_EQ(verify.code, kExitRpcError) << verify.err;
  EXPECT_NE(verify.err.find("(or pass --key)"), std::string::npos) << verify.err;
  CtlRun bad_key = RunCtl({"verify", "file:///nowhere/manifest.json", "--key", "not-a-key"});
  EXPECT_EQ(bad_key.code, kExitUsage);
  EXPECT_NE(bad_key.err.find("--key: \"not-a-key\" is neither a PEM public key file nor base64"), std::string::npos)
      << bad_key.err;
}

TEST(QuarkdSigningKeyTest, ABadKeyStopsQuarkdNamingTheFlag) {
  quark::testing::TempDir dir;
  quark::testing::WriteFile(dir.path() / "bad.pem", "not a key");
  quark::testing::QuarkdOptions options;
  options.extra_args = {"--signing-key", (dir.path() / "bad.pem").string()};
  absl::StatusOr<std::unique_ptr<quark::testing::Quarkd>> quarkd = quark::testing::Quarkd::Start(options);
  ASSERT_FALSE(quarkd.ok());
  EXPECT_NE(quarkd.status().message().find("signing-key: " + (dir.path() / "bad.pem").string() +
                                           ": not a PEM Ed25519 PRIVATE KEY"),
            std::string::npos) << quarkd.status();
}

}  // namespace
}  // namespace quark::client
