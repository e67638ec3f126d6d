// OpenMP's wait policy in the engine's executables (core/base/openmp_wait_policy.h), in real processes: libgomp's own
// account of its settings (OMP_DISPLAY_ENV=VERBOSE, printed when it is loaded) in `quark` and `quark-worker`, started
// with no policy, with an operator's policy, with an operator's spin count, with a device that is not there, and after
// the OpenBLAS core guard's re-execution.
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "core/base/blas_core.h"
#include "tests/algorithms/cli_run.h"

namespace quark {
namespace {

using testing::CliRun;
using testing::RunShell;

// A process started with neither libgomp setting and no earlier OpenBLAS guard's, plus `vars`, asking libgomp to print
// what it read.
std::string Env(const std::string& vars) {
  return std::string("env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT ") + testing::kUnsetBlasGuardVariables +
         " OMP_DISPLAY_ENV=VERBOSE " + vars + " ";
}

// Every value libgomp printed for `name`, in order (one per loaded image: two when the process re-executed itself).
std::vector<std::string> Displayed(const CliRun& run, const std::string& name) {
  std::vector<std::string> values;
  const std::string key = name + " = '";
  for (size_t at = run.output.find(key); at != std::string::npos; at = run.output.find(key, at + 1)) {
    const size_t begin = at + key.size();
    values.push_back(run.output.substr(begin, run.output.find('\'', begin) - begin));
  }
  return values;
}

size_t Count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// The OpenBLAS core guard's re-execution before main, forced on a CPU this OpenBLAS knows; "" on a CPU without AVX2,
// where the guard keeps the generic core and does not re-execute.
std::string ForcedBlasReexecution() {
  if (MatchingBlasCore(DetectCpuVectorFeatures()).empty()) return "";
  return testing::kForcedGenericBlasCore;
}

struct Binary {
  const char* path;
  const char* help_line;  // a line of its --help text
};
void PrintTo(const Binary& binary, std::ostream* out) { *out << binary.path; }

class OpenMpWaitProcessTest : public ::testing::TestWithParam<Binary> {};

TEST_P(OpenMpWaitProcessTest, WithoutAPolicyTheProcessReexecutesWithPassiveWaits) {
  const CliRun run = RunShell(Env("") + GetParam().path + " --help");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // The first image spun (libgomp's default); the re-executed one, which runs the command, sleeps at once.
  ASSERT_EQ(Displayed(run, "GOMP_SPINCOUNT").size(), 2u) << run.output;
  EXPECT_NE(Displayed(run, "GOMP_SPINCOUNT")[0], "0") << run.output;
  EXPECT_EQ(Displayed(run, "GOMP_SPINCOUNT")[1], "0") << run.output;
  EXPECT_EQ(Displayed(run, "OMP_WAIT_POLICY").back(), "PASSIVE") << run.output;
  // The same arguments, run once.
  EXPECT_EQ(Count(run.output, GetParam().help_line), 1u) << run.output;
}

TEST_P(OpenMpWaitProcessTest, AnOperatorsPolicyIsKept) {
  const CliRun run = RunShell(Env("OMP_WAIT_POLICY=ACTIVE") + GetParam().path + " --help");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_EQ(Displayed(run, "OMP_WAIT_POLICY"), std::vector<std::string>{"ACTIVE"}) << run.output;
  EXPECT_NE(Displayed(run, "GOMP_SPINCOUNT").at(0), "0") << run.output;
}

TEST_P(OpenMpWaitProcessTest, AnOperatorsSpinCountIsKept) {
  const CliRun run = RunShell(Env("GOMP_SPINCOUNT=1000") + GetParam().path + " --help");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(Displayed(run, "GOMP_SPINCOUNT"), std::vector<std::string>{"1000"}) << run.output;
}

// Where the OpenBLAS guard re-executes before main (recent Xeons), that re-execution sets the policy too: two images
// in all, not a third for main's own re-execution, and the command runs once.
TEST_P(OpenMpWaitProcessTest, TheBlasGuardsReexecutionCarriesThePolicy) {
  const std::string forced = ForcedBlasReexecution();
  if (forced.empty()) GTEST_SKIP() << "a CPU without AVX2: the OpenBLAS guard keeps a generic core, no re-execution";
  const CliRun run = RunShell(Env(forced) + GetParam().path + " --help");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(Count(run.output, "re-executing with OPENBLAS_CORETYPE="), 1u) << run.output;
  EXPECT_EQ(Count(run.output, " and OMP_WAIT_POLICY=PASSIVE\n"), 1u) << run.output;
  ASSERT_EQ(Displayed(run, "GOMP_SPINCOUNT").size(), 2u) << run.output;
  EXPECT_NE(Displayed(run, "GOMP_SPINCOUNT")[0], "0") << run.output;
  EXPECT_EQ(Displayed(run, "GOMP_SPINCOUNT")[1], "0") << run.output;
  EXPECT_EQ(Count(run.output, GetParam().help_line), 1u) << run.output;
}

// A program that does not sleep OpenMP's threads (a test binary: it never calls EnsurePassiveOpenMpWaits) keeps
// libgomp's default through the guard's re-execution; an operator's spin count is kept by it.
TEST(OpenMpWaitBlasGuardTest, OnlyTheProgramsThatSleepOpenMpsThreadsGetThePolicyFromTheGuard) {
  const std::string forced = ForcedBlasReexecution();
  if (forced.empty()) GTEST_SKIP() << "a CPU without AVX2: the OpenBLAS guard keeps a generic core, no re-execution";
  const std::string test_binary =
      std::string(QUARK_ALGORITHMS_TEST_BINARY) + " --gtest_list_tests --gtest_filter=GptqTest.HessianIs*";
  const CliRun test_run = RunShell(Env(forced) + test_binary);
  ASSERT_EQ(test_run.exit_code, 0) << test_run.output;
  EXPECT_EQ(Count(test_run.output, "re-executing with OPENBLAS_CORETYPE="), 1u) << test_run.output;
  EXPECT_EQ(Count(test_run.output, "OMP_WAIT_POLICY=PASSIVE"), 0u) << test_run.output;
  ASSERT_EQ(Displayed(test_run, "GOMP_SPINCOUNT").size(), 2u) << test_run.output;
  EXPECT_NE(Displayed(test_run, "GOMP_SPINCOUNT")[1], "0") << test_run.output;

  const CliRun spin_count = RunShell(Env(forced + " GOMP_SPINCOUNT=1000") + QUARK_CLI_BINARY + " --help");
  ASSERT_EQ(spin_count.exit_code, 0) << spin_count.output;
  EXPECT_EQ(Count(spin_count.output, "OMP_WAIT_POLICY=PASSIVE"), 0u) << spin_count.output;
  EXPECT_EQ(Displayed(spin_count, "GOMP_SPINCOUNT"), (std::vector<std::string>{"1000", "1000"})) << spin_count.output;
}

// A device that is not there (cuda:63: no such GPU, or a LibTorch without CUDA) is refused from the first start, not
// after a re-execution's second one (core/engine/engine_process.h): one image, the device named.
TEST(OpenMpWaitDeviceTest, AnUnusableDeviceIsRefusedWithoutReexecuting) {
  for (const std::string& command :
       {std::string(QUARK_CLI_BINARY) + " eval --model /nonexistent --text /nonexistent --device=cuda:63",
        std::string(QUARK_CLI_BINARY) + " quantize --model /nonexistent --scheme uint4_wo_128 --output /nonexistent "
                                        "--device cuda:63",
        std::string(QUARK_WORKER_BINARY) + " --server 127.0.0.1:1 --devices cpu,cuda:63",
        "QUARK_WORKER_DEVICES=cuda:63 " + std::string(QUARK_WORKER_BINARY) + " --server 127.0.0.1:1"}) {
    const CliRun run = RunShell(Env("") + command);
    EXPECT_NE(run.exit_code, 0) << command << "\n" << run.output;
    EXPECT_EQ(Displayed(run, "GOMP_SPINCOUNT").size(), 1u) << command << "\n" << run.output;
    EXPECT_NE(run.output.find("cuda:63"), std::string::npos) << command << "\n" << run.output;
  }
}

INSTANTIATE_TEST_SUITE_P(EngineExecutables, OpenMpWaitProcessTest,
                         ::testing::Values(Binary{QUARK_CLI_BINARY, "quark: quantize, evaluate and inspect models"},
                                           Binary{QUARK_WORKER_BINARY, "quark-worker: runs quantization jobs leased from quarkd"}),
                         [](const ::testing::TestParamInfo<Binary>& info) {
                           return std::string(info.index == 0 ? "quark" : "quark_worker");
                         });

}  // namespace
}  // namespace quark
