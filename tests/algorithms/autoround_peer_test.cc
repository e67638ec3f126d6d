// #35 item 2: the engine's AutoRound against Intel auto-round's own SignRound code (quantize_block, WrapperLinear,
// quant_tensor_asym, SignSGD, LinearLR, best-loss logic: bench/algorithms/peers/autoround_peer.py, run in the Debian
// trixie chroot by bench/algorithms/autoround_vs_peer.sh) on the same decoder layer: layer 0 of tinyllama-a on 2
// windows of 32 tokens, uint4 asymmetric groups of 32, a batch of both windows (so the samplers' different random
// streams pick the same batch), 3 iterations. Iteration 0 is round to nearest on the min-max grid on both sides; the
// next two are one and two signed steps of the same gradient (the engine sums per-sample gradients, auto-round takes
// the batch's mean: the same sign unless a component is float noise), so the three losses must agree to float noise.
// Over 200 iterations the paths part once a near-zero gradient's sign or a rounding tie differs
// (docs/results/algorithms.md, the AutoRound section, has that run).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>


namespace quark {
namespace {

std::string Env(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : fallback;
}

// The script's stdout and stderr together, and its exit code.
std::string RunScript(const std::string& command, int* exit_code) {
  std::string text;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return *exit_code = -1, text;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof(buffer), pipe)) text.append(buffer, n);
  const int status = pclose(pipe);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return text;
}

// The JSON line of `side` ("engine" or "auto-round") in the script's output.
nlohmann::json Side(const std::string& output, const std::string& side) {
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '{') continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.value("side", "") == side) return j;
  }
  return nlohmann::json();
}

TEST(AutoRoundPeerTest, FirstIterationsEqualAutoRoundsOwnCode) {
  const std::string command = "ITERS=3 SAMPLES=2 HELDOUT=1 SEQ=32 BATCH=2 GROUP=32 ALGO_BENCH=" QUARK_ALGO_BENCH
                              " bash " + Env("QUARK_SOURCE_DIR", ".") + "/bench/algorithms/autoround_vs_peer.sh " +
                              Env("QUARK_BINARY_DIR", "build") + " " + Env("QUARK_SHARED_DIR", "../shared");
  int rc = 0;
  const std::string output = RunScript(command, &rc);
  if (rc == 77) {
    // auto-round's source is on GitHub only and the trixie chroot is a developer's provisioning (as for the
    // compressed-tensors and Quark peers), neither of which CI machines have: a visible skip on the allowed list
    // (tests/support/legitimate_skips.txt), never a pass; the script's message says which part is missing.
    const size_t why = output.rfind("auto-round peer missing");
    GTEST_SKIP() << "auto-round peer not provisioned on this machine (bench/algorithms/autoround_vs_peer.sh: "
                 << (why == std::string::npos ? output : output.substr(why)) << ")";
  }
  ASSERT_EQ(rc, 0) << output;
  const nlohmann::json engine = Side(output, "engine");
  const nlohmann::json peer = Side(output, "auto-round");
  ASSERT_TRUE(engine.is_object() && peer.is_object()) << output;
  EXPECT_LT(peer["float_layer_max_abs_diff"].get<double>(), 1e-5) << "the harness's float layer is the engine's";
  ASSERT_EQ(engine["losses"].size(), 3u);
  ASSERT_EQ(peer["losses"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const double e = engine["losses"][i], p = peer["losses"][i];
    EXPECT_NEAR(e, p, 1e-5 * p) << "iteration " << i << (i == 0 ? " (round to nearest)" : " (signed steps)");
  }
  // The steps moved the rounding (lr 1/3 here: large steps, the loss may rise), so the equal losses compared them.
  EXPECT_NE(engine["losses"][1].get<double>(), engine["losses"][0].get<double>());
  EXPECT_NE(engine["losses"][2].get<double>(), engine["losses"][1].get<double>());
}

}  // namespace
}  // namespace quark
