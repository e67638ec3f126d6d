// The BLAS kernels GPTQ's bit-for-bit tests assume (issue #33, item 0). Their claims (the Hessian equal to Quark's
// add_batch GEMM at 1 and 2 BLAS threads, the LAPACK factor equal to LibTorch's chain) compare two computations that
// both run OpenBLAS, so they hold for some kernels only. Measured with OPENBLAS_CORETYPE on the AMD EPYC Zen 4 of CI
// (OpenBLAS 0.3.21):
//   SkylakeX, Cooperlake (AVX-512): all hold (Cooperlake is what OpenBLAS picks there; SkylakeX on the Xeon of the
//     issue);
//   Haswell, Zen (AVX2): the two factor tests hold; the Hessian's bits do not (a GEMM's bits depend on a product's
//     place in the call there, so the engine's panels of the lower triangle, mirrored, are not Quark's one full GEMM,
//     whose X^T X is not even symmetric): HessianIsQuarksAddBatchBitForBit and HessianStartsFromItsFirstBatch check
//     the float64 bound of tests/algorithms/hessian_bound.h instead on every kernel but the AVX-512 ones;
//   Prescott (SSE3): the factor tests' blocked factor dies in strsm_kernel_RT_PRESCOTT.
// OpenBLAS 0.3.21 picks Haswell on a newer EPYC (Zen 5: AVX-512 with VP2INTERSECT; seen 2026-12-04, GEMM as fast as
// with SkylakeX there), so CI may run any of these: a claim verified on AVX-512 only checks a weaker bound elsewhere.
// RowRangesInParallelGiveTheOneRangeResult holds on every kernel (kAnyKernel): GPTQ's lazy update runs the same GEMM
// calls on fixed blocks of rows whatever the thread count (core/algorithms/gptq.cc, kUpdateRows); seen on SkylakeX,
// Cooperlake, Haswell, Zen, Sandybridge, Nehalem, Barcelona and Prescott.
// So each test names the kernels it was seen to hold on (Verified) and checks them first. The OpenBLAS core guard
// (core/base/blas_core_guard.cc, linked into every LibTorch binary) re-executes a binary that OpenBLAS put on a
// generic core, so a generic core here means it was overridden (OPENBLAS_CORETYPE, QUARK_ALLOW_GENERIC_BLAS).
#pragma once

#include <dlfcn.h>

#include <string>

#include <gtest/gtest.h>

#include "absl/strings/ascii.h"
#include "core/base/blas_core.h"

namespace quark::algorithms::testing {

/// openblas_get_corename() of this process; "" when LibTorch's BLAS is not OpenBLAS.
inline std::string OpenBlasCoreName() {
  using CoreName = char* (*)();
  const auto corename = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  return corename == nullptr || corename() == nullptr ? "" : corename();
}

/// The kernels a claim was seen to hold on (see above).
enum class Verified {
  kAvx512,          // SkylakeX, Cooperlake
  kAvx2AndAvx512,   // also Haswell, Zen
  kAnyKernel,       // the claim does not depend on the kernels (the core is only recorded)
};

/// Success when OpenBLAS runs kernels the claim was seen to hold on; otherwise a failure naming the kernels it runs
/// and the ones assumed. Records the core as the test's `openblas_core` property.
inline ::testing::AssertionResult BitForBitBlasKernels(Verified verified) {
  const std::string core = OpenBlasCoreName();
  ::testing::Test::RecordProperty("openblas_core", core.empty() ? "(not OpenBLAS)" : core);
  const std::string lower = absl::AsciiStrToLower(core);
  const bool avx512 = lower == "skylakex" || lower == "cooperlake";
  const bool avx2 = lower == "haswell" || lower == "zen";
  if (avx512 || (avx2 && verified == Verified::kAvx2AndAvx512) || verified == Verified::kAnyKernel) {
    return ::testing::AssertionSuccess() << "OpenBLAS core " << core;
  }
  const std::string target = MatchingBlasCore(DetectCpuVectorFeatures());
  ::testing::AssertionResult failure = ::testing::AssertionFailure();
  if (core.empty()) {
    failure << "LibTorch's BLAS is not OpenBLAS here";
  } else if (IsGenericBlasCore(core) && !target.empty()) {
    failure << "OpenBLAS runs its generic " << core << " kernels on a CPU whose " << target
            << " kernels it should run (the OpenBLAS core guard was overridden: OPENBLAS_CORETYPE, "
               "QUARK_ALLOW_GENERIC_BLAS)";
  } else {
    failure << "OpenBLAS runs its " << core << " kernels";
  }
  return failure << ": this bit-for-bit claim assumes OpenBLAS's "
                 << (verified == Verified::kAvx512 ? "AVX-512 SkylakeX/Cooperlake kernels"
                                                   : "SkylakeX/Cooperlake/Haswell/Zen kernels")
                 << " (tests/algorithms/blas_kernels.h)";
}

}  // namespace quark::algorithms::testing
