// NVFP4 fake quantization on cuda:0 (kernels/cuda/nvfp4_cuda.cu) against the CPU kernel on the same values, bit for
// bit: float32, bfloat16 and float16; one group, odd row counts, long rows; NaN, +-Inf, -0, subnormals, a zero
// group, block scales below e4m3's range; each group's scale from its own amax (dynamic activations), the global
// scale given or from the tensor's amax, and calibrated block scales (weights). Labelled `gpu`: skips, saying so,
// without a CUDA device (fails then if QUARK_EXPECT_CUDA is set).

#include <cstdlib>
#include <limits>
#include <string>

#include <gtest/gtest.h>

#include "core/numerics/nvfp4_quant.h"
#include "core/numerics/quant_kernels.h"
#include "core/numerics/quant_params.h"
#include "tests/support/require_cuda.h"

namespace quark {
namespace {

class Nvfp4CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    QUARK_REQUIRE_CUDA("the NVFP4 CUDA kernel was not run");
  }
};

at::Tensor Awkward(int64_t rows, int64_t len, uint64_t seed) {
  at::manual_seed(static_cast<int64_t>(seed));
  at::Tensor x = at::randn({rows, len});
  float* p = x.data_ptr<float>();
  const int64_t n = x.numel();
  for (int64_t i = 0; i < n; i += 37) p[i] *= 50.0f;
  for (int64_t i = 16; i < 32 && i < n; ++i) p[i] = 0.0f;      // a zero group
  for (int64_t i = 48; i < 64 && i < n; ++i) p[i] *= 1e-6f;    // block scales below e4m3's smallest subnormal
  if (n > 80) p[70] = 1e-40f;                                    // a float32 subnormal
  if (n > 100) p[99] = -0.0f;
  if (n > 130) p[129] = std::numeric_limits<float>::quiet_NaN();
  if (n > 300) p[299] = std::numeric_limits<float>::infinity();
  if (n > 400) p[400] = -std::numeric_limits<float>::infinity();
  return x;
}

// Bits of a float tensor as integers, so that NaN payloads and -0 compare too.
at::Tensor BitsOf(const at::Tensor& t) {
  return t.scalar_type() == at::kFloat ? t.contiguous().view(at::kInt) : t.contiguous().view(at::kShort);
}

int64_t DifferingBits(const at::Tensor& a, const at::Tensor& b) { return (BitsOf(a) != BitsOf(b)).sum().item<int64_t>(); }

TEST_F(Nvfp4CudaTest, TheCudaKernelIsTheCpuKernelBitForBit) {
  const at::Device cuda(at::kCUDA, 0);
  ASSERT_EQ(QuantKernelsFor(cuda).name(), "cuda");
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    for (auto [rows, len] : {std::pair<int64_t, int64_t>{1, 16}, {17, 32}, {3, 4096}, {129, 1040}}) {
      const at::Tensor x = Awkward(rows, len, static_cast<uint64_t>(rows * 7 + len)).to(dtype);
      const std::string what = std::string(c10::toString(dtype)) + " " + std::to_string(rows) + "x" + std::to_string(len);
      // Dynamic: the global scale from the tensor's amax, each group's scale from its own.
      EXPECT_EQ(DifferingBits(Nvfp4FakeQuantize(x, nullptr), Nvfp4FakeQuantize(x.to(cuda), nullptr).cpu()), 0)
          << what << ", dynamic";
      // A calibrated global scale with dynamic groups (an input), then calibrated block scales (a weight).
      QuantParams global;
      global.global_scale = at::full({1}, 0.037f);
      EXPECT_EQ(DifferingBits(Nvfp4FakeQuantize(x, &global), Nvfp4FakeQuantize(x.to(cuda), &global).cpu()), 0)
          << what << ", given global scale";
      const at::Tensor block_amax = x.to(at::kFloat).abs().nan_to_num(0).reshape({rows, len / 16, 16}).amax(-1);
      QuantParams weight = Nvfp4Params(block_amax, 40.0f);
      QuantParams on_device = weight;
      on_device.scale = weight.scale.to(cuda);
      EXPECT_EQ(DifferingBits(Nvfp4FakeQuantize(x, &weight), Nvfp4FakeQuantize(x.to(cuda), &on_device).cpu()), 0)
          << what << ", calibrated block scales";
      // Into a destination on the device, in place.
      at::Tensor dest = x.to(cuda);
      Nvfp4FakeQuantize(dest, &weight, &dest);
      EXPECT_EQ(DifferingBits(Nvfp4FakeQuantize(x, &weight), dest.cpu()), 0) << what << ", in place";
    }
  }
}

}  // namespace
}  // namespace quark
