// quarkctl against a quarkd with TLS (certificates made by openssl here) and bearer tokens: --tls-ca, --token,
// $QUARK_TOKEN, the refusals' exit codes and messages, and the admin audit command.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "client/output.h"
#include "client/quarkctl_app.h"
#include "tests/client/run_ctl.h"
#include "tests/worker/support/quarkd.h"

namespace quark::client {
namespace {

using Ctl = CtlRun;

bool Shell(const std::string& command) { return std::system((command + " >/dev/null 2>&1").c_str()) == 0; }

std::string Sha256(const std::string& token) {
  std::string command = "printf %s '" + token + "' | sha256sum";
  FILE* pipe = popen(command.c_str(), "r");
  char hex[65] = {};
  if (pipe == nullptr || fread(hex, 1, 64, pipe) != 64) hex[0] = 0;
  if (pipe) pclose(pipe);
  return hex;
}

class QuarkctlSecureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/quarkctl-tls-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes ";
    std::ofstream(dir_ + "/ext") << "subjectAltName=IP:127.0.0.1,DNS:localhost\n";
    ASSERT_TRUE(Shell("openssl req -x509 " + ec + "-days 2 -subj /CN=ca -keyout " + dir_ + "/ca.key -out " + dir_ +
                      "/ca.pem"));
    ASSERT_TRUE(Shell("openssl req " + ec + "-subj /CN=localhost -keyout " + dir_ + "/server.key -out " + dir_ +
                      "/server.csr"));
    ASSERT_TRUE(Shell("openssl x509 -req -days 2 -in " + dir_ + "/server.csr -CA " + dir_ + "/ca.pem -CAkey " + dir_ +
                      "/ca.key -CAcreateserial -extfile " + dir_ + "/ext -out " + dir_ + "/server.pem"));
    std::ofstream(dir_ + "/tokens.json")
        << "{\"tokens\": [{\"name\": \"ci\", \"sha256\": \"" << Sha256(kSubmitter)
        << "\", \"tenant\": \"team\", \"role\": \"submitter\"}, {\"name\": \"ops\", \"sha256\": \"" << Sha256(kAdmin)
        << "\", \"role\": \"admin\"}]}\n";
    quark::testing::QuarkdOptions options;
    options.workers = 1;
    options.extra_args = {"--tls-cert", dir_ + "/server.pem", "--tls-key", dir_ + "/server.key", "--tokens-file",
                          dir_ + "/tokens.json"};
    absl::StatusOr<std::unique_ptr<quark::testing::Quarkd>> quarkd = quark::testing::Quarkd::Start(options);
    ASSERT_TRUE(quarkd.ok()) << quarkd.status();
    quarkd_ = std::move(*quarkd);
    root_ = "file://" + quarkd_->root().string();
  }
  void TearDown() override {
    unsetenv("QUARK_TOKEN");
    std::error_code error;
    std::filesystem::remove_all(dir_, error);
  }

  std::vector<std::string> Args(std::vector<std::string> tail, bool tls = true) {
    std::vector<std::string> args = {"--server", quarkd_->address()};
    if (tls) args.insert(args.end(), {"--tls-ca", dir_ + "/ca.pem"});
    args.insert(args.end(), tail.begin(), tail.end());
    return args;
  }

  static constexpr char kSubmitter[] = "qk_quarkctl_submitter_123";
  static constexpr char kAdmin[] = "qk_quarkctl_admin_456";
  std::string dir_;
  std::unique_ptr<quark::testing::Quarkd> quarkd_;
  std::string root_;
};

TEST_F(QuarkctlSecureTest, TokenAndTlsFlagsAndTheirRefusals) {
  Ctl anonymous = RunCtl(Args({"presets"}));
  EXPECT_EQ(anonymous.code, kExitRpcError);
  EXPECT_NE(anonymous.err.find("UNAUTHENTICATED: missing bearer token"), std::string::npos) << anonymous.err;
  Ctl plaintext = RunCtl(Args({"--token", kSubmitter, "presets"}, /*tls=*/false));
  EXPECT_EQ(plaintext.code, kExitRpcError);
  EXPECT_NE(plaintext.err.find("UNAVAILABLE"), std::string::npos) << plaintext.err;
  Ctl half = RunCtl(Args({"--tls-cert", dir_ + "/server.pem", "presets"}));
  EXPECT_EQ(half.code, kExitUsage);
  EXPECT_NE(half.err.find("--tls-cert and --tls-key"), std::string::npos) << half.err;

  Ctl submitted = RunCtl(Args({"--token", kSubmitter, "-o", "json", "submit", "--model", root_ + "/models/m", "--scheme",
                            "fp8", "--output", root_ + "/out", "--wait"}));
  EXPECT_EQ(submitted.code, kExitOk) << submitted.err << quarkd_->Log();
  EXPECT_NE(submitted.out.find("\"tenant\":\"team\""), std::string::npos) << submitted.out;

  setenv("QUARK_TOKEN", kSubmitter, 1);
  Ctl listed = RunCtl(Args({"list"}));
  EXPECT_EQ(listed.code, kExitOk) << listed.err;
  Ctl audit = RunCtl(Args({"audit"}));
  EXPECT_EQ(audit.code, kExitRpcError);
  EXPECT_NE(audit.err.find("PERMISSION_DENIED: ListAuditRecords: ci has role submitter"), std::string::npos)
      << audit.err;
  Ctl admin_audit = RunCtl(Args({"--token", kAdmin, "audit"}));
  EXPECT_EQ(admin_audit.code, kExitOk) << admin_audit.err;
  EXPECT_NE(admin_audit.out.find("ci (team, submitter)  submit job-"), std::string::npos) << admin_audit.out;
  EXPECT_EQ(admin_audit.out.find(kSubmitter), std::string::npos);
}

}  // namespace
}  // namespace quark::client
