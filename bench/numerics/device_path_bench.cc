// device_path_bench: the numerics' two kernel sets side by side on the same CPU tensors, one after the other in the
// same run: the vectorized CPU kernels (what CPU tensors get) and the tensor-op kernels (what a tensor on any other
// device gets, here run by LibTorch's CPU ops). Both give the same bits (tests/numerics/tensor_op_kernels_test.cc);
// this measures what the generality costs on the CPU. Best of `repeats` runs each, GB/s of input.
// Usage: device_path_bench [repeats] [rows] [cols]
#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "core/base/openmp_wait_policy.h"
#include "core/engine/engine_init.h"
#include "core/numerics/quant_kernels.h"

namespace {

double BestSeconds(int repeats, const std::function<void()>& run) {
  double best = 1e30;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

struct Case {
  std::string name;
  std::function<void(const quark::QuantKernels&, const at::Tensor&, at::Tensor&)> run;
};

}  // namespace

int main(int argc, char** argv) {
  quark::EnsurePassiveOpenMpWaits();  // OpenMP's idle threads sleep, as in quark and quark-worker
  quark::InitEngine();
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  const int64_t rows = argc > 2 ? std::atoll(argv[2]) : 4096;
  const int64_t cols = argc > 3 ? std::atoll(argv[3]) : 4096;
  using quark::kernels::ChannelLayout;
  const ChannelLayout per_channel{1, rows, cols};
  const ChannelLayout per_group{1, rows * cols / 128, 128};
  const at::Tensor channel_scale = at::rand({rows}) * 0.05 + 0.001;
  const at::Tensor group_scale = at::rand({rows * cols / 128}) * 0.05 + 0.001;
  auto affine = [](const at::Tensor& scale, const at::Tensor& zero, int qmin, int qmax) {
    quark::AffineKernelArgs a;
    a.scale = scale;
    a.zero_point = zero;
    a.qmin = qmin;
    a.qmax = qmax;
    return a;
  };
  const quark::AffineKernelArgs int8_channel = affine(channel_scale, at::zeros({rows}), -128, 127);
  const quark::AffineKernelArgs uint4_group =
      affine(group_scale, at::full({rows * cols / 128}, 8.0f), 0, 15);
  const std::vector<Case> cases = {
      {"int8 per-channel", [&](auto& k, auto& x, auto& y) { k.FakeAffine(x, y, per_channel, int8_channel); }},
      {"uint4 g128", [&](auto& k, auto& x, auto& y) { k.FakeAffine(x, y, per_group, uint4_group); }},
      {"fp8 e4m3 per-channel",
       [&](auto& k, auto& x, auto& y) { k.FakeFloat(x, y, per_channel, channel_scale, quark::kernels::ElemFormat::kFp8E4M3); }},
      {"mxfp4",
       [&](auto& k, auto& x, auto& y) {
         k.FakeMx(x, y, rows, cols, quark::kernels::MxArgs{quark::kernels::ElemFormat::kFp4E2M1}, at::Tensor());
       }},
  };
  std::printf("device_path_bench: %lld x %lld, %d threads, best of %d\n", static_cast<long long>(rows),
              static_cast<long long>(cols), at::get_num_threads(), repeats);
  std::printf("%-22s %-9s %12s %12s %8s\n", "case", "dtype", "cpu GB/s", "ops GB/s", "ratio");
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    const at::Tensor x = (at::randn({rows, cols}) * 0.02).to(dtype);
    at::Tensor y = at::empty_like(x);
    const double gb = static_cast<double>(x.numel() * x.element_size()) / 1e9;
    for (const Case& c : cases) {
      const double cpu = BestSeconds(repeats, [&] { c.run(quark::CpuQuantKernels(), x, y); });
      const double ops = BestSeconds(repeats, [&] { c.run(quark::TensorOpQuantKernels(), x, y); });
      std::printf("%-22s %-9s %12.2f %12.2f %8.1f\n", c.name.c_str(), c10::toString(dtype), gb / cpu, gb / ops,
                  ops / cpu);
    }
  }
  return 0;
}
