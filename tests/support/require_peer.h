// A test whose real peer (PostgreSQL, Slurm, s3rver, llama.cpp, ONNX Runtime, node, the quark CLI...) is missing
// skips on a developer machine, and fails in CI: with CI=true (as CI services set it) or QUARK_REQUIRE_PEERS=1, a
// passing count then says the peers ran. Every peer-dependent test uses QUARK_PEER_MISSING() instead of GTEST_SKIP().
// The skips that stay skips everywhere (a GPU test without a device, a CPU-feature lane the CPU lacks) keep GTEST_SKIP
// and are listed in tests/support/legitimate_skips.txt with their reason.
#ifndef QUARK_TESTS_SUPPORT_REQUIRE_PEER_H_
#define QUARK_TESTS_SUPPORT_REQUIRE_PEER_H_

#include <gtest/gtest.h>

#include <cstdlib>
#include <string_view>

namespace quark::testing {

/// True when a missing peer is a failure: CI is "true"/"1" (any case), or QUARK_REQUIRE_PEERS is set and not "0".
inline bool PeersRequired() {
  const char* require = std::getenv("QUARK_REQUIRE_PEERS");
  if (require != nullptr && *require != '\0' && std::string_view(require) != "0") return true;
  const char* ci = std::getenv("CI");
  if (ci == nullptr) return false;
  const std::string_view v(ci);
  return v == "1" || v == "true" || v == "TRUE" || v == "True";
}

inline ::testing::TestPartResult::Type PeerMissingResult() {
  return PeersRequired() ? ::testing::TestPartResult::kFatalFailure : ::testing::TestPartResult::kSkip;
}

inline const char* PeerMissingPrefix() {
  return PeersRequired() ? "a required test peer is missing (CI=true or QUARK_REQUIRE_PEERS=1)" : "";
}

}  // namespace quark::testing

/// `QUARK_PEER_MISSING() << "PostgreSQL is not installed";` returns from the current function (as GTEST_SKIP() and
/// GTEST_FAIL() do): a skip, or a fatal failure when PeersRequired().
#define QUARK_PEER_MISSING()                                                                                   \
  return ::testing::internal::AssertHelper(::quark::testing::PeerMissingResult(), __FILE__, __LINE__,         \
                                           ::quark::testing::PeerMissingPrefix()) = ::testing::Message()

#endif  // QUARK_TESTS_SUPPORT_REQUIRE_PEER_H_
