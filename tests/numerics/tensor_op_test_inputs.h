// What the tensor-op kernel tests share (tensor_op_kernels_test on CPU tensors, tensor_op_kernels_cuda_test on CUDA
// tensors): the layouts and dtypes they cover, inputs that reach every branch of the element math, and a bitwise
// comparison that names the first differing element.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>

#include "core/numerics/quant_kernels.h"
#include "tests/numerics/test_util.h"

namespace quark::testing {

inline constexpr kernels::ChannelLayout kTensorOpLayouts[] = {{1, 1, 1},  {1, 1, 17}, {1, 17, 1},  {1, 1, 1025},
                                                              {3, 17, 1}, {5, 7, 32}, {1, 33, 31}, {2, 4, 1025}};
inline constexpr at::ScalarType kTensorOpDtypes[] = {at::kFloat, at::kBFloat16, at::kHalf};

struct IntGrid {
  int qmin, qmax;
};
inline constexpr IntGrid kTensorOpIntGrids[] = {{-128, 127}, {0, 255}, {-8, 7}, {0, 15}};

/// Values with a spread of magnitudes around `unit`, exact ties of every rounding mode, and the special values
/// (a CPU tensor of `dtype`).
inline at::Tensor TensorOpInputs(int64_t n, uint64_t seed, float unit, at::ScalarType dtype) {
  at::Tensor v = RandomTensor({n}, seed) * unit * 16.0f;
  const at::Tensor ties = at::round(RandomTensor({n}, seed + 1) * 40.0f) * (0.5f * unit);
  const at::Tensor index = at::arange(n);
  v = at::where(index.remainder(5) == 1, ties, v);
  constexpr float kInf = std::numeric_limits<float>::infinity();
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  const float specials[] = {0.0f, -0.0f, kNaN, kInf, -kInf, 1e-40f, -3.0e38f, 1e-30f};
  for (int64_t i = 0; i < n; i += 7) v[i] = specials[(i / 7) % 8];
  return v.to(dtype);
}

inline std::string DescribeLayout(const kernels::ChannelLayout& l, at::ScalarType dtype) {
  return std::string(c10::toString(dtype)) + " [" + std::to_string(l.outer) + "," + std::to_string(l.channels) + "," +
         std::to_string(l.inner) + "]";
}

/// Adds a failure naming the first element whose bits differ; `b` may be on any device.
inline void ExpectBitEqual(const at::Tensor& cpu, const at::Tensor& other, const std::string& what) {
  const at::Tensor b = other.cpu();
  if (BitEqual(cpu, b)) return;
  const at::Tensor fa = cpu.to(at::kFloat).reshape({-1});
  const at::Tensor fb = b.to(at::kFloat).reshape({-1});
  for (int64_t i = 0; i < fa.numel() && i < fb.numel(); ++i) {
    const float x = fa[i].item<float>();
    const float y = fb[i].item<float>();
    if (std::memcmp(&x, &y, 4) != 0) {
      ADD_FAILURE() << what << ": element " << i << " cpu " << x << " tensor-ops " << y;
      return;
    }
  }
  ADD_FAILURE() << what << ": bits differ (NaN payloads, or dtype/shape)";
}

}  // namespace quark::testing
