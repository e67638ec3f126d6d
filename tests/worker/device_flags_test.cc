// `quark --device` and `quark-worker --devices` with a device this machine does not have: both refuse at once
// (well within a second of start-up), exit 2 and name the device and the flag, instead of computing on the CPU or
// registering with quarkd and waiting for work they cannot do.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "tests/algorithms/cli_run.h"

namespace quark::testing {
namespace {

namespace fs = std::filesystem;

std::string Fixture(const std::string& relative) {
  const char* shared = std::getenv("QUARK_SHARED_DIR");
  return shared ? std::string(shared) + "/fixtures/" + relative : relative;
}

bool ThisProcessHasCuda() {
  return c10::impl::hasDeviceGuardImpl(c10::DeviceType::CUDA) &&
         c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->deviceCount() > 0;
}

struct TimedRun {
  CliRun run;
  double seconds = 0;
};

TimedRun Timed(const std::string& command) {
  const auto start = std::chrono::steady_clock::now();
  TimedRun t;
  t.run = Quark(command);
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return t;
}

class DeviceFlagsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(QuarkBinary().empty()) << "QUARK_BINARY_DIR is not set";
    if (ThisProcessHasCuda()) GTEST_SKIP() << "this machine has a CUDA device";
  }
};

TEST_F(DeviceFlagsTest, QuantizeRefusesAMissingGpuNamingIt) {
  const std::string model = Fixture("stories260K");
  ASSERT_TRUE(fs::exists(model)) << model;
  const TimedRun t = Timed("quantize --model " + model + " --scheme fp8 --device cuda:0 --eval " +
                           Fixture("eval/tinystories_validation_prefix.txt"));
  EXPECT_EQ(t.run.exit_code, 2) << t.run.output;
  EXPECT_NE(t.run.output.find("device: cuda:0 is not available"), std::string::npos) << t.run.output;
  // Start-up (LibTorch's libraries) included; the refusal itself does no work.
  EXPECT_LT(t.seconds, 5.0) << t.run.output;
}

TEST_F(DeviceFlagsTest, EvalRefusesAMissingGpuAndNonsense) {
  const std::string model = Fixture("stories260K");
  TimedRun t = Timed("eval --model " + model + " --text /nonexistent --device cuda:1");
  EXPECT_EQ(t.run.exit_code, 2) << t.run.output;
  EXPECT_NE(t.run.output.find("--device: cuda:1 is not available"), std::string::npos) << t.run.output;
  t = Timed("eval --model " + model + " --text /nonexistent --device tpu:0");
  EXPECT_EQ(t.run.exit_code, 2) << t.run.output;
  EXPECT_NE(t.run.output.find("--device: \"tpu:0\" is not a device"), std::string::npos) << t.run.output;
  // The CPU still works.
  t = Timed("eval --model " + model + " --text " + Fixture("eval/tinystories_validation_prefix.txt") +
            " --seq-len 32 --max-windows 1 --device cpu --json");
  EXPECT_EQ(t.run.exit_code, 0) << t.run.output;
}

TEST_F(DeviceFlagsTest, WorkerRefusesAMissingGpuBeforeRegistering) {
  const char* bin = std::getenv("QUARK_BINARY_DIR");
  ASSERT_NE(bin, nullptr);
  // Nothing listens on this port: a worker that got past the device check would retry there until killed by
  // `timeout`, exit code 124.
  const std::string worker = std::string(bin) + "/worker/quark-worker";
  const std::string data = fs::temp_directory_path() / ("quark_device_flags_" + std::to_string(getpid()));
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(
      popen(("timeout 20 " + worker + " --server 127.0.0.1:9 --data-dir " + data +
             " --skip-throughput-probe --devices cpu,cuda:0 2>&1")
                .c_str(),
            "r"),
      pclose);
  ASSERT_TRUE(pipe);
  std::string output;
  char buffer[4096];
  while (fgets(buffer, sizeof(buffer), pipe.get()) != nullptr) output += buffer;
  const int status = pclose(pipe.release());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fs::remove_all(data);
  ASSERT_TRUE(WIFEXITED(status)) << output;
  EXPECT_EQ(WEXITSTATUS(status), 2) << output;
  EXPECT_NE(output.find("--devices: cuda:0 is not available"), std::string::npos) << output;
  EXPECT_LT(seconds, 5.0) << output;
}

}  // namespace
}  // namespace quark::testing
