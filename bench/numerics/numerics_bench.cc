// numerics_bench: fake-quant throughput (GB/s of input) per dtype x scheme on LLM-sized weights, and its ratio to
// a plain copy of the same tensor into a preallocated buffer, timed in the same run. Parameters are computed once
// (static weights); the timed pass is FakeQuantizeInto. The copy and the fake quantization of each row are timed
// alternately, best of `repeats` each, so that a neighbour's load on a shared machine hits both alike.
// Usage: numerics_bench [repeats] [substring of the rows to run, e.g. "bfloat16" or "mxfp4"]
#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/base/openmp_wait_policy.h"
#include "core/engine/engine_init.h"
#include "core/numerics/fake_quant.h"

namespace {

struct Case {
  std::string name;
  quark::QuantSpec spec;
};

quark::QuantSpec Make(quark::DType d, quark::QScheme q, bool symmetric = true, int group = 0, bool mx = false) {
  quark::QuantSpec s;
  s.dtype = d;
  s.qscheme = q;
  s.symmetric = symmetric;
  if (group) s.group_size = group;
  if (mx) s.scale_format = quark::ScaleFormat::kE8M0;
  return s;
}

std::vector<Case> Cases() {
  using quark::DType;
  using quark::QScheme;
  return {
      {"int8 per_tensor", Make(DType::kInt8, QScheme::kPerTensor)},
      {"int8 per_channel", Make(DType::kInt8, QScheme::kPerChannel)},
      {"uint8 per_channel asym", Make(DType::kUInt8, QScheme::kPerChannel, false)},
      {"fp8_e4m3 per_tensor", Make(DType::kFp8E4M3, QScheme::kPerTensor)},
      {"fp8_e4m3 per_channel", Make(DType::kFp8E4M3, QScheme::kPerChannel)},
      {"fp8_e5m2 per_channel", Make(DType::kFp8E5M2, QScheme::kPerChannel)},
      {"uint4 per_group128 asym", Make(DType::kUInt4, QScheme::kPerGroup, false, 128)},
      {"int4 per_group128", Make(DType::kInt4, QScheme::kPerGroup, true, 128)},
      {"fp4 per_group32", Make(DType::kFp4, QScheme::kPerGroup, true, 32)},
      {"fp6_e2m3 per_channel", Make(DType::kFp6E2M3, QScheme::kPerChannel)},
      {"mxfp8_e4m3", Make(DType::kFp8E4M3, QScheme::kPerGroup, true, 32, true)},
      {"mxfp6_e3m2", Make(DType::kFp6E3M2, QScheme::kPerGroup, true, 32, true)},
      {"mxfp4", Make(DType::kFp4, QScheme::kPerGroup, true, 32, true)},
      {"mxint8", Make(DType::kInt8, QScheme::kPerGroup, true, 32, true)},
  };
}

double Seconds(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Best of `repeats` alternating timings of a and b, in seconds.
std::pair<double, double> BestAlternating(int repeats, const std::function<void()>& a, const std::function<void()>& b) {
  double best_a = 1e30, best_b = 1e30;
  for (int i = 0; i < repeats; ++i) {
    best_a = std::min(best_a, Seconds(a));
    best_b = std::min(best_b, Seconds(b));
  }
  return {best_a, best_b};
}

}  // namespace

int main(int argc, char** argv) {
  quark::EnsurePassiveOpenMpWaits();  // OpenMP's idle threads sleep, as in quark and quark-worker
  quark::InitEngine();
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  const std::string filter = argc > 2 ? argv[2] : "";
  std::printf("threads: %d, repeats: %d (best of)\n", quark::EngineThreads(), repeats);
  std::printf("%-12s %-9s %-26s %9s %9s %7s\n", "shape", "dtype", "scheme", "GB/s", "copyGB/s", "ratio");
  for (const auto& shape : std::vector<std::vector<int64_t>>{{4096, 4096}, {4096, 11008}}) {
    for (at::ScalarType t : {at::kFloat, at::kBFloat16}) {
      const at::Tensor x = (at::randn(shape, at::kFloat) * 0.02).to(t);
      const double gb = static_cast<double>(x.numel() * x.element_size()) / 1e9;
      // Preallocated output: both sides time one pass over memory, not the page faults of a fresh allocation.
      at::Tensor out = at::empty_like(x);
      out.copy_(x);
      const std::string shape_s = std::to_string(shape[0]) + "x" + std::to_string(shape[1]);
      const char* dtype_s = t == at::kFloat ? "float32" : "bfloat16";
      for (const Case& c : Cases()) {
        if ((shape_s + " " + dtype_s + " " + c.name).find(filter) == std::string::npos) continue;
        auto params = quark::ParamsOf(x, c.spec, quark::TensorRole::kWeight);
        if (!params.ok()) {
          std::printf("%s: %s\n", c.name.c_str(), std::string(params.status().message()).c_str());
          return 1;
        }
        const auto [copy_s, s] = BestAlternating(
            repeats, [&] { out.copy_(x); },
            [&] {
              if (!quark::FakeQuantizeInto(x, c.spec, *params, out).ok()) std::abort();
            });
        std::printf("%-12s %-9s %-26s %9.2f %9.2f %6.0f%%\n", shape_s.c_str(), dtype_s, c.name.c_str(), gb / s,
                    gb / copy_s, 100.0 * copy_s / s);
      }
    }
  }
  return 0;
}
