// The layer streamer on a CUDA device: stories260K's next-token NLL computed with every layer, activation and the head
// on cuda:0 equals the CPU streamer's within 1e-5 (relative, mean over the tokens), with the next layer staged beside
// the current one on a side stream (double buffering). Labelled `gpu`; skips, saying
// so, where LibTorch sees no CUDA device, and fails there when QUARK_EXPECT_CUDA is set (the GPU kit).
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "core/runtime/layer_streamer.h"
#include "tests/runtime/test_paths.h"
#include "tests/support/require_cuda.h"

namespace quark::runtime {
namespace {

class DeviceStreamingCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    QUARK_REQUIRE_CUDA("no layer was streamed on CUDA");
    testing::InitTestEngine();
  }
};

double MeanNll(const StreamerOptions& options, bool* double_buffered) {
  auto streamer = LayerStreamer::Open(testing::Stories260K(), options);
  EXPECT_TRUE(streamer.ok()) << streamer.status();
  at::manual_seed(5);
  const std::vector<at::Tensor> samples = {at::randint(1, 500, {1, 256}, at::kLong),
                                           at::randint(1, 500, {1, 100}, at::kLong)};
  auto hidden = (*streamer)->Run(samples);
  EXPECT_TRUE(hidden.ok()) << hidden.status();
  double sum = 0;
  int64_t count = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    auto nll = (*streamer)->model().NextTokenNll((*hidden)[i], samples[i]);
    EXPECT_TRUE(nll.ok()) << nll.status();
    EXPECT_TRUE(nll->device().is_cpu());
    sum += nll->sum().item<double>();
    count += nll->numel();
  }
  *double_buffered = (*streamer)->double_buffered();
  return sum / static_cast<double>(count);
}

TEST_F(DeviceStreamingCudaTest, PerplexityOnCudaIsTheCpusWithDoubleBuffering) {
  bool buffered = false;
  const double cpu = MeanNll({}, &buffered);
  EXPECT_FALSE(buffered);
  StreamerOptions cuda;
  cuda.device = *ComputeDevice::Open("cuda:0");
  const double doubled = MeanNll(cuda, &buffered);
  EXPECT_TRUE(buffered);
  EXPECT_NEAR(doubled, cpu, 1e-5 * cpu);
  std::printf("mean NLL cpu=%.9f cuda=%.9f\n", cpu, doubled);
}

}  // namespace
}  // namespace quark::runtime
