// QUARK_PEER_MISSING(): a skip on a developer machine, a fatal failure with CI=true or QUARK_REQUIRE_PEERS=1.
#include "tests/support/require_peer.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

namespace quark::testing {
namespace {

// Sets (or, with nullopt, removes) CI and QUARK_REQUIRE_PEERS for one test, restoring them after.
class ScopedPeerEnv {
 public:
  ScopedPeerEnv(std::optional<std::string> ci, std::optional<std::string> require)
      : ci_(Get("CI")), require_(Get("QUARK_REQUIRE_PEERS")) {
    Set("CI", ci);
    Set("QUARK_REQUIRE_PEERS", require);
  }
  ~ScopedPeerEnv() {
    Set("CI", ci_);
    Set("QUARK_REQUIRE_PEERS", require_);
  }

 private:
  static std::optional<std::string> Get(const char* name) {
    const char* v = std::getenv(name);
    return v == nullptr ? std::nullopt : std::optional<std::string>(v);
  }
  static void Set(const char* name, const std::optional<std::string>& v) {
    if (v) {
      setenv(name, v->c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
  std::optional<std::string> ci_, require_;
};

void MissingPeer() { QUARK_PEER_MISSING() << "the peer under test"; }

// The one result MissingPeer() reports, intercepted so that this test itself neither skips nor fails.
::testing::TestPartResult ReportedResult() {
  ::testing::TestPartResultArray results;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    MissingPeer();
  }
  EXPECT_EQ(results.size(), 1);
  return results.GetTestPartResult(0);
}

TEST(RequirePeerTest, SkipsOnADeveloperMachine) {
  for (const auto& ci : {std::optional<std::string>(), std::optional<std::string>("false"),
                         std::optional<std::string>("")}) {
    ScopedPeerEnv env(ci, std::nullopt);
    EXPECT_FALSE(PeersRequired());
    const ::testing::TestPartResult r = ReportedResult();
    EXPECT_TRUE(r.skipped()) << ci.value_or("(unset)");
    EXPECT_NE(std::string(r.message()).find("the peer under test"), std::string::npos);
  }
  ScopedPeerEnv env(std::nullopt, "0");
  EXPECT_TRUE(ReportedResult().skipped());
}

TEST(RequirePeerTest, FailsWithCiTrueOrQuarkRequirePeers) {
  for (const auto& [ci, require] : {std::pair<std::optional<std::string>, std::optional<std::string>>{"true", {}},
                                    {"1", {}},
                                    {"TRUE", {}},
                                    {{}, "1"},
                                    {"false", "yes"}}) {
    ScopedPeerEnv env(ci, require);
    EXPECT_TRUE(PeersRequired());
    const ::testing::TestPartResult r = ReportedResult();
    EXPECT_TRUE(r.fatally_failed()) << ci.value_or("(unset)") << " " << require.value_or("(unset)");
    EXPECT_NE(std::string(r.message()).find("required test peer is missing"), std::string::npos) << r.message();
    EXPECT_NE(std::string(r.message()).find("the peer under test"), std::string::npos) << r.message();
  }
}

}  // namespace
}  // namespace quark::testing
