// ChooseBlasCore(): the OpenBLAS core guard's decision as a pure function of the reported core, the CPU's vector
// extensions and the environment (issue #33, item 0). The re-exec itself is tested on a real binary in
// tests/algorithms/blas_core_process_test.cc.
#include "core/base/blas_core.h"

#include <gtest/gtest.h>

namespace quark {
namespace {

using Action = BlasCoreDecision::Action;

CpuVectorFeatures Avx512() { return {true, true, true, true, true, true}; }
CpuVectorFeatures Avx2() { return {true, true, false, false, false, false}; }
CpuVectorFeatures SseOnly() { return {}; }

BlasCoreInputs Inputs(std::string_view corename, CpuVectorFeatures cpu) {
  BlasCoreInputs in;
  in.corename = corename;
  in.cpu = cpu;
  return in;
}

TEST(BlasCoreTest, GenericCoresAreTheSseOnesInAnyCase) {
  for (const char* core : {"Prescott", "prescott", "PRESCOTT", "Core2", "Nehalem", "Atom", "Opteron_SSE3", "Barcelona",
                           "Katmai", "Unknown"}) {
    EXPECT_TRUE(IsGenericBlasCore(core)) << core;
  }
  for (const char* core : {"Haswell", "SkylakeX", "Cooperlake", "SapphireRapids", "Zen", "Sandybridge", "", "x"}) {
    EXPECT_FALSE(IsGenericBlasCore(core)) << core;
  }
}

TEST(BlasCoreTest, MatchingCoreFollowsTheCpu) {
  EXPECT_EQ(MatchingBlasCore(Avx512()), "SkylakeX");
  EXPECT_EQ(MatchingBlasCore(Avx2()), "Haswell");
  EXPECT_EQ(MatchingBlasCore(SseOnly()), "");
  CpuVectorFeatures partial = Avx512();
  partial.avx512vl = false;  // AVX-512 F without VL: SkylakeX kernels would fault, Haswell's run
  EXPECT_EQ(MatchingBlasCore(partial), "Haswell");
  CpuVectorFeatures no_fma = Avx2();
  no_fma.fma = false;
  EXPECT_EQ(MatchingBlasCore(no_fma), "");
}

TEST(BlasCoreTest, GenericCoreOnAModernCpuReexecutesWithTheMatchingKernels) {
  const BlasCoreDecision avx512 = ChooseBlasCore(Inputs("Prescott", Avx512()));
  EXPECT_EQ(avx512.action, Action::kReexec);
  EXPECT_EQ(avx512.coretype, "SkylakeX");
  EXPECT_NE(avx512.message.find("generic core Prescott"), std::string::npos) << avx512.message;
  EXPECT_NE(avx512.message.find("re-executing with OPENBLAS_CORETYPE=SkylakeX"), std::string::npos) << avx512.message;
  const BlasCoreDecision avx2 = ChooseBlasCore(Inputs("Nehalem", Avx2()));
  EXPECT_EQ(avx2.action, Action::kReexec);
  EXPECT_EQ(avx2.coretype, "Haswell");
}

TEST(BlasCoreTest, NothingToDoWithoutOpenBlasOrWithAMatchingOrHonestCore) {
  for (const BlasCoreInputs& in : {Inputs("", Avx512()), Inputs("Cooperlake", Avx512()), Inputs("Haswell", Avx512()),
                                   Inputs("Zen", Avx2()), Inputs("Prescott", SseOnly())}) {
    const BlasCoreDecision d = ChooseBlasCore(in);
    EXPECT_EQ(d.action, Action::kKeep) << in.corename;
    EXPECT_EQ(d.message, "") << in.corename;
  }
}

TEST(BlasCoreTest, TheOperatorsCoretypeAndOptOutWin) {
  BlasCoreInputs in = Inputs("Prescott", Avx512());
  in.operator_coretype = "Prescott";
  BlasCoreDecision d = ChooseBlasCore(in);
  EXPECT_EQ(d.action, Action::kKeep);
  EXPECT_NE(d.message.find("keeping OPENBLAS_CORETYPE=Prescott as the operator set it"), std::string::npos)
      << d.message;
  in = Inputs("Prescott", Avx512());
  in.allow_generic = true;
  d = ChooseBlasCore(in);
  EXPECT_EQ(d.action, Action::kKeep);
  EXPECT_NE(d.message.find("QUARK_ALLOW_GENERIC_BLAS=1"), std::string::npos) << d.message;
}

TEST(BlasCoreTest, AReexecutedProcessNeverReexecutesAgain) {
  // OpenBLAS honoured the coretype: keep, and say what happened.
  BlasCoreInputs in = Inputs("SkylakeX", Avx512());
  in.operator_coretype = "SkylakeX";
  in.reexecuted_from = "Prescott";
  BlasCoreDecision d = ChooseBlasCore(in);
  EXPECT_EQ(d.action, Action::kKeep);
  EXPECT_NE(d.message.find("re-executed with OPENBLAS_CORETYPE=SkylakeX, OpenBLAS now runs SkylakeX kernels"),
            std::string::npos)
      << d.message;
  // OpenBLAS ignored it (a build without DYNAMIC_ARCH): fail clearly, or run anyway when the operator allows it.
  in.corename = "Prescott";
  d = ChooseBlasCore(in);
  EXPECT_EQ(d.action, Action::kFail);
  EXPECT_NE(d.message.find("even with OPENBLAS_CORETYPE=SkylakeX"), std::string::npos) << d.message;
  EXPECT_NE(d.message.find("QUARK_ALLOW_GENERIC_BLAS=1"), std::string::npos) << d.message;
  in.allow_generic = true;
  EXPECT_EQ(ChooseBlasCore(in).action, Action::kKeep);
}

}  // namespace
}  // namespace quark
