// quarkctl (the built binary and the in-process app) against a real quarkd with spawned test-mode workers.
#include <gtest/gtest.h>

#include <sstream>

#include <nlohmann/json.hpp>

#include "client/output.h"
#include "client/quarkctl_app.h"
#include "tests/client/run_ctl.h"
#include "tests/worker/support/quarkd.h"

namespace quark::client {
namespace {

using Result = CtlRun;

std::string LastLine(const std::string& text) {
  std::string trimmed = text.substr(0, text.find_last_not_of('\n') + 1);
  return trimmed.substr(trimmed.find_last_of('\n') + 1);
}

class QuarkctlE2eTest : public ::testing::Test {
 protected:
  void StartQuarkd(const std::string& test_mode) {
    quark::testing::QuarkdOptions options;
    options.workers = 1;
    options.test_mode = test_mode;
    absl::StatusOr<std::unique_ptr<quark::testing::Quarkd>> quarkd = quark::testing::Quarkd::Start(options);
    ASSERT_TRUE(quarkd.ok()) << quarkd.status();
    quarkd_ = std::move(*quarkd);
    root_ = "file://" + quarkd_->root().string();
  }
  std::vector<std::string> Submit(std::vector<std::string> extra) {
    std::vector<std::string> args = {"--server", quarkd_->address(), "-o", "json", "submit", "--model",
                                     root_ + "/models/m", "--scheme", "fp8", "--output", root_ + "/out"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  std::unique_ptr<quark::testing::Quarkd> quarkd_;
  std::string root_;
};

TEST_F(QuarkctlE2eTest, BinarySubmitWaitJsonEndsWithFinalJob) {
  StartQuarkd("noop");
  quark::testing::TempDir dir;
  std::vector<std::string> argv = {quark::testing::BuiltBinary("client/quarkctl")};
  for (const std::string& a : Submit({"--wait", "--kv-cache-dtype", "fp8", "--label", "team=ml"})) argv.push_back(a);
  absl::StatusOr<std::unique_ptr<quark::testing::Subprocess>> quarkctl =
      quark::testing::Subprocess::Start(argv, {}, dir.path() / "out.txt");
  ASSERT_TRUE(quarkctl.ok());
  absl::StatusOr<int> code = (*quarkctl)->Wait(std::chrono::seconds(60));
  ASSERT_TRUE(code.ok()) << code.status();
  std::string output = (*quarkctl)->Log();
  EXPECT_EQ(*code, 0) << output << quarkd_->Log();
  nlohmann::json job = nlohmann::json::parse(LastLine(output), nullptr, false);
  ASSERT_TRUE(job.is_object()) << output;
  EXPECT_EQ(job["state"], "JOB_STATE_SUCCEEDED");
  EXPECT_EQ(job["spec"]["kv_cache_dtype"], "fp8");
  EXPECT_EQ(job["spec"]["labels"]["team"], "ml");
  EXPECT_TRUE(job["result"]["metrics"].contains("seconds_total")) << job.dump();
}

TEST_F(QuarkctlE2eTest, GetListPresetsAndTables) {
  StartQuarkd("noop");
  Result submitted = RunCtl(Submit({"--wait", "--request-id", "req-1"}));
  ASSERT_EQ(submitted.code, 0) << submitted.err;
  nlohmann::json job = nlohmann::json::parse(LastLine(submitted.out));
  std::string id = job["id"];
  // The same request id returns the same job.
  Result again = RunCtl(Submit({"--request-id", "req-1"}));
  EXPECT_EQ(nlohmann::json::parse(LastLine(again.out))["id"], id);

  Result get = RunCtl({"--server", quarkd_->address(), "get", id});
  EXPECT_EQ(get.code, 0);
  EXPECT_NE(get.out.find("state:     SUCCEEDED"), std::string::npos) << get.out;
  Result list = RunCtl({"--server", quarkd_->address(), "-o", "json", "list", "--state", "succeeded"});
  EXPECT_EQ(list.code, 0) << list.err;
  EXPECT_NE(list.out.find(id), std::string::npos) << list.out;
  Result table = RunCtl({"--server", quarkd_->address(), "list", "--all"});
  EXPECT_NE(table.out.find("SUCCEEDED"), std::string::npos) << table.out;
  Result presets = RunCtl({"--server", quarkd_->address(), "presets"});
  EXPECT_EQ(presets.code, 0) << presets.err;
  EXPECT_NE(presets.out.find("NAME"), std::string::npos);
  Result watch = RunCtl({"--server", quarkd_->address(), "watch", id});
  EXPECT_EQ(watch.code, 0);
  EXPECT_NE(watch.out.find("#1 "), std::string::npos) << watch.out;
  Result json_after = RunCtl({"get", id, "-o", "json", "--server", quarkd_->address()});
  EXPECT_EQ(json_after.code, 0) << json_after.err;
  EXPECT_EQ(nlohmann::json::parse(LastLine(json_after.out))["id"], id);
  Result valid = RunCtl({"--server", quarkd_->address(), "validate", "--scheme", "fp8"});
  EXPECT_EQ(valid.code, 0) << valid.out << valid.err;
  Result invalid = RunCtl({"--server", quarkd_->address(), "validate", "--scheme", "no-such-scheme", "-o", "json"});
  EXPECT_NE(invalid.code, 0) << invalid.out;
  Result missing = RunCtl({"--server", quarkd_->address(), "get", "no-such-job"});
  EXPECT_EQ(missing.code, kExitRpcError);
  EXPECT_NE(missing.err.find("NOT_FOUND"), std::string::npos) << missing.err;
}

TEST_F(QuarkctlE2eTest, CancelledJobExitsWith3) {
  StartQuarkd("sleep:60");
  Result submitted = RunCtl(Submit({}));
  ASSERT_EQ(submitted.code, 0) << submitted.err;
  std::string id = nlohmann::json::parse(LastLine(submitted.out))["id"];
  Result cancel = RunCtl({"--server", quarkd_->address(), "cancel", id});
  EXPECT_EQ(cancel.code, 0) << cancel.err;
  Result watch = RunCtl({"--server", quarkd_->address(), "-o", "json", "watch", id});
  EXPECT_EQ(watch.code, kExitCancelled) << watch.out << watch.err;
  EXPECT_EQ(nlohmann::json::parse(LastLine(watch.out))["state"], "JOB_STATE_CANCELLED");
}

// --deadline (#17) through the real quark-worker: the running job is told to stop when its deadline passes, ends
// FAILED with DEADLINE_EXCEEDED (exit code 1 with --wait), and is not retried.
TEST_F(QuarkctlE2eTest, DeadlineStopsARunningJobAndWaitExitsWith1) {
  StartQuarkd("sleep:60");
  Result submitted = RunCtl(Submit({"--deadline", "2", "--max-attempts", "3", "--wait"}));
  EXPECT_EQ(submitted.code, kExitJobFailed) << submitted.out << submitted.err << quarkd_->Log();
  nlohmann::json job = nlohmann::json::parse(LastLine(submitted.out), nullptr, false);
  ASSERT_TRUE(job.is_object()) << submitted.out;
  EXPECT_EQ(job["state"], "JOB_STATE_FAILED");
  EXPECT_EQ(job["error"].get<std::string>().rfind("DEADLINE_EXCEEDED: deadline of 2 s passed", 0), 0u) << job.dump();
  EXPECT_EQ(job["attempts"].size(), 1u) << job.dump();
  EXPECT_EQ(job["spec"]["deadline_seconds"], "2") << "int64 is a string in protobuf's JSON";
}

}  // namespace
}  // namespace quark::client
