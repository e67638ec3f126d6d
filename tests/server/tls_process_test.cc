// TLS on quarkd's gRPC port with the real executable and certificates made by openssl: plaintext refused off
// loopback without --insecure, TLS served and checked by clients, SIGHUP swapping the certificate for new
// handshakes (a bad file keeps the old one), mutual TLS, and jobs run by local workers behind TLS.
#include <signal.h>
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "core/config/presets.h"
#include "server/security/tls_credentials.h"
#include "tests/server/quarkd_process.h"
#include "tests/server/security_fixture.h"

namespace quark::server {
namespace {

namespace pb = quark::v1;
using testing::ChannelSpec;
using testing::QuarkdProcess;
using testing::TestCa;
using testing::WaitFor;

class TlsProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_.File("models/m"));
    std::filesystem::create_directories(dir_.File("out"));
    ASSERT_TRUE(ca1_.ok() && ca2_.ok() && client_ca_.ok()) << "openssl req failed";
    ASSERT_TRUE(ca1_.Issue("server1", "localhost", "IP:127.0.0.1,DNS:localhost"));
    ASSERT_TRUE(ca2_.Issue("server2", "localhost", "IP:127.0.0.1,DNS:localhost"));
    ASSERT_TRUE(client_ca_.Issue("client", "ci-client", "DNS:ci-client"));
    std::filesystem::copy_file(ca1_.Path("server1.pem"), dir_.File("server.pem"));
    std::filesystem::copy_file(ca1_.Path("server1.key"), dir_.File("server.key"));
  }

  std::vector<std::string> Args(const std::vector<std::string>& extra) {
    bool listen = std::find(extra.begin(), extra.end(), "--listen") != extra.end();
    std::vector<std::string> args = {"--data-dir", dir_.File("data"), "--listen", listen ? extra[1] : "127.0.0.1:0",
                                     "--metrics-listen", "", "--workers", "1",
                                     "--worker-binary", QUARK_TEST_WORKER_BINARY,
                                     "--allowed-roots", dir_.File("models") + "," + dir_.File("out"),
                                     "--heartbeat-interval-ms", "100"};
    args.insert(args.end(), extra.begin() + (listen ? 2 : 0), extra.end());
    return args;
  }

  bool StartQuarkd(const std::vector<std::string>& extra) {
    quarkd_ = std::make_unique<QuarkdProcess>();
    return quarkd_->Start(QUARKD_BINARY, Args(extra), dir_.File("ready.json"), dir_.File("quarkd.log"));
  }

  std::vector<std::string> TlsFlags() {
    return {"--tls-cert", dir_.File("server.pem"), "--tls-key", dir_.File("server.key")};
  }

  // ListPresets over a new channel: the code of the outcome (OK, UNAVAILABLE for a failed handshake, ...).
  grpc::StatusCode Probe(const ChannelSpec& spec) {
    auto stub = pb::QuantizationService::NewStub(testing::MakeChannel(quarkd_->address(), spec));
    pb::ListPresetsResponse response;
    return stub->ListPresets(testing::Call().get(), pb::ListPresetsRequest(), &response).error_code();
  }

  std::string Log() { return testing::ReadText(dir_.File("quarkd.log")); }

  testing::TempDir dir_;
  TestCa ca1_{dir_.path(), "ca1"};
  TestCa ca2_{dir_.path(), "ca2"};
  TestCa client_ca_{dir_.path(), "client-ca"};
  std::unique_ptr<QuarkdProcess> quarkd_;
};

TEST_F(TlsProcessTest, PlaintextOffLoopbackNeedsInsecure) {
  std::string command = std::string(QUARKD_BINARY) + " --data-dir " + dir_.File("data") +
                        " --listen 0.0.0.0:0 --metrics-listen '' --workers 0 > " + dir_.File("refused.log") + " 2>&1";
  EXPECT_NE(std::system(command.c_str()), 0);
  std::string log = testing::ReadText(dir_.File("refused.log"));
  EXPECT_NE(log.find("give --tls-cert and --tls-key, or --insecure"), std::string::npos) << log;
  // --insecure is the explicit opt-in; loopback (every test and the demo) needs none.
  ASSERT_TRUE(StartQuarkd({"--listen", "0.0.0.0:0", "--insecure"})) << Log();
  EXPECT_EQ(Probe({}), grpc::StatusCode::OK);
}

// Issue #29: 0.0.0.0 with TLS but no tokens file (every caller an anonymous admin that may act as a worker) started
// without a word.
TEST_F(TlsProcessTest, ReachableWithoutTokensIsWarnedAbout) {
  std::vector<std::string> flags = TlsFlags();
  flags.insert(flags.begin(), {"--listen", "0.0.0.0:0"});
  ASSERT_TRUE(StartQuarkd(flags)) << Log();
  EXPECT_NE(Log().find("is reachable from other machines without --tokens-file"), std::string::npos) << Log();
}

// Issue #29: the store was created 0644 (and the data dir 0755) with the usual umask.
TEST_F(TlsProcessTest, TheDataDirAndTheStoreArePrivateToQuarkdsUser) {
  const mode_t old_mask = umask(022);
  const bool started = StartQuarkd({});
  umask(old_mask);
  ASSERT_TRUE(started) << Log();
  struct stat dir {}, db {};
  ASSERT_EQ(stat(dir_.File("data").c_str(), &dir), 0);
  ASSERT_EQ(stat(dir_.File("data/quarkd.db").c_str(), &db), 0);
  EXPECT_EQ(dir.st_mode & 0777, 0700u);
  EXPECT_EQ(db.st_mode & 0777, 0600u);
}

TEST(IsLoopbackHostTest, OnlyLoopbackAddressLiteralsAndLocalhost) {
  for (const char* host : {"127.0.0.1", "127.1.2.3", "::1", "localhost", "unix:/run/quarkd.sock"}) {
    EXPECT_TRUE(IsLoopbackHost(host)) << host;
  }
  for (const char* host : {"127.evil.example", "127.0.0.1.nip.io", "0.0.0.0", "10.0.0.1", "", "128.0.0.1", "127."}) {
    EXPECT_FALSE(IsLoopbackHost(host)) << host;
  }
}

TEST_F(TlsProcessTest, ServesTlsRefusesPlaintextAndRunsJobsOnLocalWorkers) {
  ASSERT_TRUE(StartQuarkd(TlsFlags())) << Log();
  EXPECT_EQ(Probe({ca1_.pem()}), grpc::StatusCode::OK);
  EXPECT_EQ(Probe({}), grpc::StatusCode::UNAVAILABLE);            // plaintext client on a TLS port
  EXPECT_EQ(Probe({ca2_.pem()}), grpc::StatusCode::UNAVAILABLE);  // a CA that did not sign the certificate

  // The local worker reaches quarkd through its unix socket and runs the job.
  auto stub = pb::QuantizationService::NewStub(testing::MakeChannel(quarkd_->address(), {ca1_.pem()}));
  pb::SubmitJobRequest request;
  request.mutable_spec()->set_model_uri("file://" + dir_.File("models/m"));
  request.mutable_spec()->set_output_uri("file://" + dir_.File("out"));
  request.mutable_spec()->set_preset(AllPresets().front().name);
  pb::Job job;
  ASSERT_TRUE(stub->SubmitJob(testing::Call().get(), request, &job).ok());
  EXPECT_TRUE(WaitFor([&] {
    pb::GetJobRequest get;
    get.set_id(job.id());
    pb::Job now;
    return stub->GetJob(testing::Call().get(), get, &now).ok() && now.state() == pb::JOB_STATE_SUCCEEDED;
  })) << Log();
}

TEST_F(TlsProcessTest, SighupSwapsTheCertificateAndKeepsItWhenTheNewOneIsBad) {
  ASSERT_TRUE(StartQuarkd(TlsFlags())) << Log();
  ASSERT_EQ(Probe({ca1_.pem()}), grpc::StatusCode::OK);
  testing::WriteText(dir_.File("server.pem"), testing::ReadText(ca2_.Path("server2.pem")));
  testing::WriteText(dir_.File("server.key"), testing::ReadText(ca2_.Path("server2.key")));
  ASSERT_EQ(kill(quarkd_->pid(), SIGHUP), 0);
  EXPECT_TRUE(WaitFor([&] { return Probe({ca2_.pem()}) == grpc::StatusCode::OK; })) << Log();
  EXPECT_EQ(Probe({ca1_.pem()}), grpc::StatusCode::UNAVAILABLE);

  // A key that does not match: refused, the CA2 certificate stays in use, quarkd keeps serving.
  testing::WriteText(dir_.File("server.key"), testing::ReadText(ca1_.Path("server1.key")));
  ASSERT_EQ(kill(quarkd_->pid(), SIGHUP), 0);
  EXPECT_TRUE(WaitFor([&] { return Log().find("reload refused") != std::string::npos; })) << Log();
  EXPECT_NE(Log().find("does not match the certificate"), std::string::npos) << Log();
  EXPECT_EQ(Probe({ca2_.pem()}), grpc::StatusCode::OK);
}

TEST_F(TlsProcessTest, MutualTlsRequiresAClientCertificateFromTheClientCa) {
  std::vector<std::string> flags = TlsFlags();
  flags.insert(flags.end(), {"--tls-client-ca", client_ca_.pem()});
  ASSERT_TRUE(StartQuarkd(flags)) << Log();
  EXPECT_EQ(Probe({ca1_.pem()}), grpc::StatusCode::UNAVAILABLE);  // no client certificate
  EXPECT_EQ(Probe({ca1_.pem(), client_ca_.Path("client.pem"), client_ca_.Path("client.key")}), grpc::StatusCode::OK);
  // A client certificate from another CA is refused too.
  ASSERT_TRUE(ca2_.Issue("stranger", "stranger", "DNS:stranger"));
  EXPECT_EQ(Probe({ca1_.pem(), ca2_.Path("stranger.pem"), ca2_.Path("stranger.key")}), grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace quark::server
