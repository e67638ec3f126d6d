// OpenBLAS's kernels against the CPU: Debian's OpenBLAS 0.3.21 (DYNAMIC_ARCH) does not know recent Xeons (family 6
// model 207: openblas_get_corename() says "Prescott") and runs SSE3 kernels there, ~3x slower in GPTQ and dying of
// SIGSEGV in strsm_kernel_RT_PRESCOTT. OpenBLAS reads OPENBLAS_CORETYPE only when it loads, so the fix is a re-exec
// of the process with OPENBLAS_CORETYPE set to the kernels the CPU can run (issue #33, item 0).
//
// Every binary that links LibTorch (quark, quark-worker, the benchmarks and the tests) runs
// EnsureBlasCoreMatchesCpu() before main (blas_core_guard.cc, force-linked through quark_torch); InitEngine() logs
// what was chosen. No LibTorch here: OpenBLAS is found at run time with dlsym.
#pragma once

#include <string>
#include <string_view>

namespace quark {

/// The x86 vector extensions OpenBLAS's Haswell and SkylakeX kernels need, as this CPU and OS support them.
struct CpuVectorFeatures {
  bool avx2 = false;
  bool fma = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
};

/// This process's CPU (all false off x86-64).
CpuVectorFeatures DetectCpuVectorFeatures();

/// True for OpenBLAS's SSE-era cores (Prescott, Core2, Nehalem, Atom, Opteron, Barcelona...), whose kernels use no
/// AVX; case-insensitive. "" (no OpenBLAS) is not generic.
bool IsGenericBlasCore(std::string_view corename);

/// The OPENBLAS_CORETYPE whose kernels match the CPU: "SkylakeX" with AVX-512 F/BW/VL/DQ, "Haswell" with AVX2 and
/// FMA, "" otherwise (a generic core is then right).
std::string MatchingBlasCore(const CpuVectorFeatures& cpu);

/// Everything the choice depends on, so that it is a pure function.
struct BlasCoreInputs {
  /// openblas_get_corename(); "" when the process has no OpenBLAS (e.g. MKL in PyTorch's LibTorch).
  std::string_view corename;
  CpuVectorFeatures cpu;
  /// OPENBLAS_CORETYPE as the operator set it; "" when unset.
  std::string_view operator_coretype;
  /// The core OpenBLAS reported before quark re-executed this process (QUARK_OPENBLAS_CORETYPE_CHOSEN); "" in a
  /// process quark did not re-execute.
  std::string_view reexecuted_from;
  /// QUARK_ALLOW_GENERIC_BLAS=1: run on a generic core rather than re-execute or fail.
  bool allow_generic = false;
};

struct BlasCoreDecision {
  enum class Action {
    kKeep,    // run as is (message may still say why, e.g. a generic core the operator chose)
    kReexec,  // re-execute with OPENBLAS_CORETYPE=coretype
    kFail,    // exit with message: the kernels could not be fixed and are known to crash
  };
  Action action = Action::kKeep;
  std::string coretype;
  /// One line for the log ("" when there is nothing to say).
  std::string message;
};

/// The decision for one process start. Never re-executes twice: a re-executed process whose OpenBLAS still reports
/// a generic core fails (unless allow_generic).
BlasCoreDecision ChooseBlasCore(const BlasCoreInputs& in);

/// Reads OpenBLAS, the CPU and the environment, and acts on ChooseBlasCore(): returns (keep), re-executes
/// /proc/self/exe with the same arguments (and OpenMP's wait policy set in a program that sleeps OpenMP's threads, so
/// that it need not re-execute again: openmp_wait_policy.h), or prints the reason and exits with status 70. The test
/// hook QUARK_TEST_BLAS_CORETYPE_IS_DETECTED=1 treats OPENBLAS_CORETYPE as what OpenBLAS detected rather than an operator's
/// choice (to force the generic-core path on a CPU OpenBLAS knows).
void EnsureBlasCoreMatchesCpu();

/// For the start-up log: what EnsureBlasCoreMatchesCpu() chose in this process, or "" when it changed nothing.
std::string BlasCoreChoiceForLog();

}  // namespace quark
