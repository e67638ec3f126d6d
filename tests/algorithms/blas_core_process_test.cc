// The OpenBLAS core guard in real processes (issue #33, item 0). Where this machine's OpenBLAS knows its CPU, the
// generic-core path is forced: OPENBLAS_CORETYPE=Prescott makes OpenBLAS really load its SSE3 kernels, and
// QUARK_TEST_BLAS_CORETYPE_IS_DETECTED=1 makes the guard take that core as detected rather than as an operator's
// choice. The re-executed child then reports the core OpenBLAS runs after the re-exec. The decision itself is
// BlasCoreTest (tests/base/blas_core_test.cc).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "core/base/blas_core.h"
#include "tests/algorithms/cli_run.h"

namespace quark {
namespace {

using testing::CliRun;
using testing::RunShell;

// The environment of a process started by no operator and no earlier guard, plus `vars`.
std::string Env(const std::string& vars) {
  return std::string("env ") + testing::kUnsetBlasGuardVariables + " " + vars + " ";
}

constexpr const char* kForcedGeneric = testing::kForcedGenericBlasCore;

// The value of the probe's `key=` line ("" when absent).
std::string Field(const CliRun& run, const std::string& key) {
  const std::string prefix = key + "=";
  size_t at = run.output.rfind("\n" + prefix);
  at = at == std::string::npos ? (run.output.rfind(prefix, 0) == 0 ? 0 : std::string::npos) : at + 1;
  if (at == std::string::npos) return "";
  const size_t end = run.output.find('\n', at);
  return run.output.substr(at + prefix.size(), end == std::string::npos ? std::string::npos : end - at - prefix.size());
}

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The kernels the guard picks on this CPU ("" on a CPU without AVX2 and FMA: a generic core is then right).
std::string Target() { return MatchingBlasCore(DetectCpuVectorFeatures()); }

TEST(BlasCoreProcessTest, TheProbeRunsOnOpenBlas) {
  const CliRun run = RunShell(Env("") + QUARK_BLAS_CORE_PROBE);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_FALSE(Field(run, "core").empty()) << "no openblas_get_corename in a LibTorch binary: " << run.output;
  EXPECT_FALSE(IsGenericBlasCore(Field(run, "core"))) << run.output;
  // Where this OpenBLAS knows the CPU there is nothing to change and nothing is said. Where it falls back to Prescott
  // on its own (0.3.21 on Sapphire Rapids and newer Xeons), the guard has re-executed with the CPU's kernels: the
  // core above is then the target, and the choice says so.
  if (!Field(run, "choice").empty()) {
    EXPECT_TRUE(Contains(Field(run, "choice"), "re-executed with OPENBLAS_CORETYPE=" + Target())) << run.output;
    EXPECT_EQ(absl::AsciiStrToLower(Field(run, "core")), absl::AsciiStrToLower(Target())) << run.output;
  }
}

TEST(BlasCoreProcessTest, AGenericCoreIsReexecutedWithTheCpusKernelsAndTheSameArguments) {
  const CliRun run = RunShell(Env(kForcedGeneric) + QUARK_BLAS_CORE_PROBE + " 'a b' c");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(Field(run, "args"), "a b|c") << run.output;
  const std::string target = Target();
  if (target.empty()) {  // a CPU without AVX2: the generic core stays
    EXPECT_EQ(absl::AsciiStrToLower(Field(run, "core")), "prescott") << run.output;
    return;
  }
  EXPECT_TRUE(Contains(run.output, "generic core Prescott")) << run.output;
  EXPECT_TRUE(Contains(run.output, "re-executing with OPENBLAS_CORETYPE=" + target)) << run.output;
  EXPECT_EQ(Field(run, "coretype"), target) << run.output;
  // What OpenBLAS itself runs in the re-executed process: the CPU's kernels, not Prescott's.
  EXPECT_EQ(absl::AsciiStrToLower(Field(run, "core")), absl::AsciiStrToLower(target)) << run.output;
  EXPECT_TRUE(Contains(Field(run, "choice"), "re-executed with OPENBLAS_CORETYPE=" + target)) << run.output;
}

TEST(BlasCoreProcessTest, AnOperatorsCoretypeIsKept) {
  const CliRun run = RunShell(Env("OPENBLAS_CORETYPE=Prescott") + QUARK_BLAS_CORE_PROBE);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(absl::AsciiStrToLower(Field(run, "core")), "prescott") << run.output;
  EXPECT_FALSE(Contains(run.output, "re-executing")) << run.output;
  if (!Target().empty()) {
    EXPECT_TRUE(Contains(Field(run, "choice"), "keeping OPENBLAS_CORETYPE=Prescott as the operator set it"))
        << run.output;
  }
}

// A re-executed process whose OpenBLAS still reports a generic core (an OpenBLAS built without DYNAMIC_ARCH) stops
// with the reason instead of running kernels known to crash; QUARK_ALLOW_GENERIC_BLAS=1 runs it anyway.
TEST(BlasCoreProcessTest, AGenericCoreAfterTheReexecFailsClearly) {
  if (Target().empty()) GTEST_SKIP() << "a CPU without AVX2: the guard keeps a generic core";
  const std::string still_generic = "QUARK_OPENBLAS_CORETYPE_CHOSEN=Prescott OPENBLAS_CORETYPE=Prescott";
  const CliRun failed = RunShell(Env(still_generic) + QUARK_BLAS_CORE_PROBE);
  EXPECT_EQ(failed.exit_code, 70) << failed.output;
  EXPECT_TRUE(Contains(failed.output, "quark: fatal: OpenBLAS reports the generic core Prescott")) << failed.output;
  EXPECT_TRUE(Contains(failed.output, "QUARK_ALLOW_GENERIC_BLAS=1")) << failed.output;
  EXPECT_EQ(Field(failed, "core"), "") << "main ran: " << failed.output;
  const CliRun allowed = RunShell(Env(still_generic + " QUARK_ALLOW_GENERIC_BLAS=1") + QUARK_BLAS_CORE_PROBE);
  ASSERT_EQ(allowed.exit_code, 0) << allowed.output;
  EXPECT_EQ(absl::AsciiStrToLower(Field(allowed, "core")), "prescott") << allowed.output;
  EXPECT_TRUE(Contains(Field(allowed, "choice"), "running anyway (QUARK_ALLOW_GENERIC_BLAS=1)")) << allowed.output;
}

// The shipped binaries and the test binaries carry the guard (linked through quark_torch, not called by hand).
TEST(BlasCoreProcessTest, QuarkTheWorkerTheBenchmarkAndTheTestsCarryTheGuard) {
  const std::string target = Target();
  if (target.empty()) GTEST_SKIP() << "a CPU without AVX2: the guard keeps a generic core";
  std::vector<std::string> commands = {
      std::string(QUARK_CLI_BINARY) + " --help",
      std::string(QUARK_WORKER_BINARY) + " --help",
#ifdef QUARK_ALGO_BENCH_BINARY
      std::string(QUARK_ALGO_BENCH_BINARY) + " --help",
#endif
      std::string(QUARK_ALGORITHMS_TEST_BINARY) + " --gtest_list_tests --gtest_filter=GptqTest.HessianIs*",
  };
  for (const std::string& command : commands) {
    const CliRun run = RunShell(Env(kForcedGeneric) + command);
    EXPECT_TRUE(Contains(run.output, "re-executing with OPENBLAS_CORETYPE=" + target)) << command << "\n"
                                                                                       << run.output;
    // The re-executed process ran: exactly one re-exec, and its own output follows.
    EXPECT_EQ(run.output.find("re-executing"), run.output.rfind("re-executing")) << command << "\n" << run.output;
  }
  EXPECT_TRUE(Contains(RunShell(Env(kForcedGeneric) + commands.back()).output, "HessianIsQuarksAddBatchBitForBit"));
}

// GPTQ's bit-for-bit tests name the kernels they assume and stop on others (here cores an operator forced, which
// the guard keeps) instead of reporting differing bits or crashing in strsm_kernel_RT_PRESCOTT; the Hessian's test
// checks the float64 bound there instead of the bits, and says so (blas_kernels.h).
TEST(BlasCoreProcessTest, GptqBitForBitTestsRefuseAGenericCore) {
  if (Target().empty()) GTEST_SKIP() << "a CPU without AVX2: the guard keeps a generic core";
  const std::string test = std::string(QUARK_ALGORITHMS_TEST_BINARY) +
                           " --gtest_filter=GptqTest.HessianIsQuarksAddBatchBitForBit:GptqTest.UpperCholesky*";
  const CliRun generic = RunShell(Env("OPENBLAS_CORETYPE=Prescott") + test);
  EXPECT_NE(generic.exit_code, 0) << generic.output;
  EXPECT_TRUE(Contains(generic.output, "OpenBLAS runs its generic Prescott kernels on a CPU whose " + Target() + " kernels it should run"))
      << generic.output;
  EXPECT_TRUE(Contains(generic.output, "2 FAILED TESTS")) << generic.output;  // the two factor tests
  EXPECT_TRUE(Contains(generic.output, "[       OK ] GptqTest.HessianIsQuarksAddBatchBitForBit")) << generic.output;
  // AVX2 kernels: the factor holds there; the Hessian's bits do not (blas_kernels.h), so its test checks the float64
  // bound and says why.
  const CliRun avx2 = RunShell(Env("OPENBLAS_CORETYPE=Haswell") + test);
  EXPECT_EQ(avx2.exit_code, 0) << avx2.output;
  EXPECT_TRUE(Contains(avx2.output, "Bits not compared, float64 bound only: OpenBLAS runs its Haswell kernels: this "
                                    "bit-for-bit claim assumes OpenBLAS's AVX-512 SkylakeX/Cooperlake kernels"))
      << avx2.output;
  EXPECT_TRUE(Contains(avx2.output, "0 values outside the float32 bound")) << avx2.output;
}

}  // namespace
}  // namespace quark
