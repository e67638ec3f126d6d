#include "core/base/blas_core.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/base/self_exec.h"

// Defined in openmp_wait_policy.cc, whose object only the programs that sleep OpenMP's threads link (its header says
// why). Weak: null in the others, so their re-executed image keeps libgomp's default as before.
extern "C" bool QuarkChoosePassiveOpenMpWaitsBeforeReexecution() __attribute__((weak));

namespace quark {
namespace {

constexpr const char* kChosenVariable = "QUARK_OPENBLAS_CORETYPE_CHOSEN";
constexpr int kExitSoftware = 70;  // sysexits.h EX_SOFTWARE

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

std::string CpuDescription(const CpuVectorFeatures& cpu) {
  return MatchingBlasCore(cpu) == "SkylakeX" ? "a CPU with AVX-512" : "a CPU with AVX2 and FMA";
}

// A function-local static: the guard runs from a constructor, possibly before this file's globals are initialized.
std::string& ChoiceForLog() {
  static std::string choice;
  return choice;
}

}  // namespace

CpuVectorFeatures DetectCpuVectorFeatures() {
  CpuVectorFeatures cpu;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  cpu.avx2 = __builtin_cpu_supports("avx2");
  cpu.fma = __builtin_cpu_supports("fma");
  cpu.avx512f = __builtin_cpu_supports("avx512f");
  cpu.avx512bw = __builtin_cpu_supports("avx512bw");
  cpu.avx512vl = __builtin_cpu_supports("avx512vl");
  cpu.avx512dq = __builtin_cpu_supports("avx512dq");
#endif
  return cpu;
}

bool IsGenericBlasCore(std::string_view corename) {
  // OpenBLAS 0.3.21's x86-64 DYNAMIC_ARCH cores whose kernels use no AVX (driver/others/dynamic.c corename[]).
  static constexpr std::array<std::string_view, 17> kGeneric = {
      "unknown", "katmai",  "coppermine", "northwood", "prescott",     "banias",    "atom", "core2", "penryn",
      "dunnington", "nehalem", "athlon", "opteron", "opteron_sse3", "barcelona", "nano", "bobcat"};
  const std::string lower = Lower(corename);
  return std::find(kGeneric.begin(), kGeneric.end(), lower) != kGeneric.end();
}

std::string MatchingBlasCore(const CpuVectorFeatures& cpu) {
  if (cpu.avx512f && cpu.avx512bw && cpu.avx512vl && cpu.avx512dq) return "SkylakeX";
  if (cpu.avx2 && cpu.fma) return "Haswell";
  return "";
}

BlasCoreDecision ChooseBlasCore(const BlasCoreInputs& in) {
  using Action = BlasCoreDecision::Action;
  const std::string target = MatchingBlasCore(in.cpu);
  if (in.corename.empty()) return {};  // no OpenBLAS in this process
  if (!IsGenericBlasCore(in.corename)) {
    if (in.reexecuted_from.empty()) return {};
    return {Action::kKeep, "",
            "OpenBLAS reported the generic core " + std::string(in.reexecuted_from) + " on this CPU: re-executed with " +
                "OPENBLAS_CORETYPE=" + std::string(in.operator_coretype) + ", OpenBLAS now runs " +
                std::string(in.corename) + " kernels"};
  }
  if (target.empty()) return {};  // the CPU has neither AVX2+FMA nor AVX-512: a generic core is the right one
  const std::string why = "OpenBLAS reports the generic core " + std::string(in.corename) + " (SSE kernels) on " +
                          CpuDescription(in.cpu) + ", whose " + target + " kernels it does not pick";
  if (!in.reexecuted_from.empty()) {
    const std::string what = why + " even with OPENBLAS_CORETYPE=" + std::string(in.operator_coretype) +
                             " (set by quark; OpenBLAS built without DYNAMIC_ARCH?)";
    if (in.allow_generic) return {Action::kKeep, "", what + "; running anyway (QUARK_ALLOW_GENERIC_BLAS=1)"};
    return {Action::kFail, "",
            what + ". Its generic kernels are slow and crash in strsm on such CPUs (issue #33): install an OpenBLAS "
                   "that knows this CPU, or set QUARK_ALLOW_GENERIC_BLAS=1 to run on the generic kernels anyway"};
  }
  if (!in.operator_coretype.empty()) {
    return {Action::kKeep, "",
            why + ": keeping OPENBLAS_CORETYPE=" + std::string(in.operator_coretype) + " as the operator set it"};
  }
  if (in.allow_generic) return {Action::kKeep, "", why + ": keeping it (QUARK_ALLOW_GENERIC_BLAS=1)"};
  return {Action::kReexec, target, why + ": re-executing with OPENBLAS_CORETYPE=" + target};
}

void EnsureBlasCoreMatchesCpu() {
  using CoreName = char* (*)();
  const auto corename_fn = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  if (corename_fn == nullptr) return;
  const char* corename = corename_fn();
  const std::string reexecuted_from = Env(kChosenVariable);
  std::string operator_coretype = Env("OPENBLAS_CORETYPE");
  // The test hook: OPENBLAS_CORETYPE stands for what OpenBLAS detected, not for an operator's choice.
  const std::string detected_for_test = Env("QUARK_TEST_BLAS_CORETYPE_IS_DETECTED");
  if (reexecuted_from.empty() && !detected_for_test.empty() && detected_for_test != "0") operator_coretype.clear();
  BlasCoreInputs in;
  in.corename = corename == nullptr ? "unknown" : corename;
  in.cpu = DetectCpuVectorFeatures();
  in.operator_coretype = operator_coretype;
  in.reexecuted_from = reexecuted_from;
  in.allow_generic = Env("QUARK_ALLOW_GENERIC_BLAS") == "1";
  const BlasCoreDecision decision = ChooseBlasCore(in);
  ChoiceForLog() = decision.message;
  switch (decision.action) {
    case BlasCoreDecision::Action::kKeep:
      return;
    case BlasCoreDecision::Action::kFail:
      std::fprintf(stderr, "quark: fatal: %s\n", decision.message.c_str());
      std::exit(kExitSoftware);
    case BlasCoreDecision::Action::kReexec:
      break;
  }
  setenv("OPENBLAS_CORETYPE", decision.coretype.c_str(), 1);
  setenv(kChosenVariable, in.corename.data(), 1);
  // The program's own re-execution for OpenMP's wait policy rides on this one instead of following it.
  const bool passive_waits = QuarkChoosePassiveOpenMpWaitsBeforeReexecution != nullptr &&
                             QuarkChoosePassiveOpenMpWaitsBeforeReexecution();
  std::fprintf(stderr, "quark: %s%s\n", decision.message.c_str(), passive_waits ? " and OMP_WAIT_POLICY=PASSIVE" : "");
  ReexecuteSelf();
  std::fprintf(stderr, "quark: fatal: could not re-execute /proc/self/exe with OPENBLAS_CORETYPE=%s; set it "
               "yourself, or QUARK_ALLOW_GENERIC_BLAS=1 to run on the generic kernels\n",
               decision.coretype.c_str());
  std::exit(kExitSoftware);
}

std::string BlasCoreChoiceForLog() { return ChoiceForLog(); }

}  // namespace quark
