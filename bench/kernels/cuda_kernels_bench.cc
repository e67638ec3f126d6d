// Throughput of every CUDA quantization kernel (kernels/cuda/quant_cuda.h) as a fraction of this device's measured
// device-to-device copy bandwidth, timed with CUDA events: int8 / fp8 / uint4 affine and float fake quantization and
// codes, MX fp8 / fp4 fake quantization and codes, int4 and fp4 packing. A kernel's bandwidth counts the bytes it must
// read and write (data, codes, scales; parameters included), and the copy's counts its read and its write.
// Goals (issue "GPU run on the H200"): >= 60% of the copy for int8 / fp8 / uint4, >= 30% for MX and fp4.
// Prints a table and, with --json PATH, writes the same figures as JSON. Without a CUDA device it says so, writes a
// JSON that says so, and exits 0 (it is a benchmark, not a test).
//
//   cuda_kernels_bench [--elements N] [--iters N] [--json PATH]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cpu/float_grid.h"
#include "kernels/cpu/format_traits.h"
#include "kernels/cuda/quant_cuda.h"
#include "kernels/element/element_ops.h"

namespace {

namespace kc = quark::kernels::cuda;
using quark::kernels::ElemFormat;

struct Options {
  int64_t elements = int64_t{1} << 27;  // 256 MiB of bfloat16: far past the H200's 50 MiB L2
  int iters = 20;
  std::string json;
};

struct Row {
  std::string kernel;
  std::string dtype;
  double bytes = 0;  // read + written per call
  double ms = 0;     // mean per call
  double fraction = 0;
  double goal = 0;
  std::string error;  // the launch's CUDA error, if any
};

bool Check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "cuda_kernels_bench: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

// Device memory freed on destruction.
class Buffer {
 public:
  explicit Buffer(size_t bytes) {
    if (!Check(cudaMalloc(&ptr_, bytes), "cudaMalloc")) std::exit(1);
  }
  ~Buffer() { cudaFree(ptr_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  template <typename T = void>
  T* get() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
};

// Mean milliseconds per call of `launch` over `iters` calls after two warm-up calls, between two CUDA events;
// the best of three such runs. Returns a negative value (and sets *error) when a launch fails.
double TimeMs(const std::function<int()>& launch, int iters, std::string* error) {
  for (int w = 0; w < 2; ++w) {
    if (const int e = launch(); e != 0) {
      *error = kc::CudaErrorName(e);
      return -1;
    }
  }
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  double best = -1;
  for (int run = 0; run < 3; ++run) {
    cudaEventRecord(start);
    for (int i = 0; i < iters; ++i) launch();
    cudaEventRecord(stop);
    if (!Check(cudaEventSynchronize(stop), "kernel run")) {
      *error = cudaGetErrorString(cudaGetLastError());
      break;
    }
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    const double per_call = ms / iters;
    if (best < 0 || per_call < best) best = per_call;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
}

// n seeded values of both signs over a few decades, stored as bfloat16 bits (rounded as the CPU rounds).
std::vector<uint16_t> Bf16Inputs(int64_t n) {
  std::vector<uint16_t> v(static_cast<size_t>(n));
  uint64_t s = 0x9E3779B97F4A7C15ull;
  for (int64_t i = 0; i < n; ++i) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    const float u = static_cast<float>(static_cast<int64_t>(s >> 40) - (int64_t{1} << 23)) / (1 << 23);
    v[i] = quark::kernels::element::Bf16Bits(u * static_cast<float>(1 << ((s >> 8) & 7)));
  }
  return v;
}

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--elements" && has_value) {
      o.elements = std::max<int64_t>(4096, std::atoll(argv[++i]) / 4096 * 4096);
    } else if (a == "--iters" && has_value) {
      o.iters = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--json" && has_value) {
      o.json = argv[++i];
    } else {
      std::fprintf(stderr, "usage: cuda_kernels_bench [--elements N] [--iters N] [--json PATH]\n");
      std::exit(2);
    }
  }
  return o;
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += (static_cast<unsigned char>(c) < 0x20) ? ' ' : c;
  }
  return out + "\"";
}

void WriteJson(const std::string& path, const std::string& device, const Options& o, double copy_gbps,
               const std::vector<Row>& rows, const std::string& skipped) {
  if (path.empty()) return;
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "cuda_kernels_bench: cannot write %s\n", path.c_str());
    return;
  }
  std::fprintf(f, "{\n  \"bench\": \"cuda_kernels_bench\",\n  \"device\": %s,\n", JsonString(device).c_str());
  if (!skipped.empty()) std::fprintf(f, "  \"skipped\": %s,\n", JsonString(skipped).c_str());
  std::fprintf(f, "  \"elements\": %lld,\n  \"iters\": %d,\n  \"copy_gbps\": %.1f,\n  \"kernels\": [",
               static_cast<long long>(o.elements), o.iters, copy_gbps);
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::fprintf(f,
                 "%s\n    {\"kernel\": %s, \"dtype\": %s, \"bytes\": %.0f, \"ms\": %.4f, \"gbps\": %.1f, "
                 "\"fraction_of_copy\": %.3f, \"goal\": %.2f, \"meets_goal\": %s, \"error\": %s}",
                 i ? "," : "", JsonString(r.kernel).c_str(), JsonString(r.dtype).c_str(), r.bytes, r.ms,
                 r.ms > 0 ? r.bytes / r.ms / 1e6 : 0.0, r.fraction, r.goal,
                 r.fraction >= r.goal ? "true" : "false", JsonString(r.error).c_str());
  }
  std::fprintf(f, "\n  ]\n}\n");
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = Parse(argc, argv);
  if (kc::CudaDeviceCount() == 0) {
    const std::string why = "no CUDA device on this machine: nothing measured";
    std::printf("cuda_kernels_bench: %s\n", why.c_str());
    WriteJson(o.json, "none", o, 0, {}, why);
    return 0;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  const std::string device = std::string(prop.name) + " (sm_" + std::to_string(prop.major) +
                             std::to_string(prop.minor) + ")";
  const int64_t n = o.elements;
  const int64_t cols = 4096;
  const int64_t rows = n / cols;
  const int64_t groups = n / 128;

  const std::vector<uint16_t> host = Bf16Inputs(n);
  Buffer x(n * 2), y(n * 2), codes(n), e8m0(n / 32 + rows), words(n / 2);
  if (!Check(cudaMemcpy(x.get(), host.data(), n * 2, cudaMemcpyHostToDevice), "upload")) return 1;
  // Parameters for up to one per 128 elements: scale, 1/scale and zero point.
  std::vector<float> scale(static_cast<size_t>(groups), 0.05f), inv(scale.size(), 20.0f), zero(scale.size(), 8.0f);
  Buffer ds(groups * 4), dinv(groups * 4), dz(groups * 4);
  cudaMemcpy(ds.get(), scale.data(), groups * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dinv.get(), inv.data(), groups * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dz.get(), zero.data(), groups * 4, cudaMemcpyHostToDevice);

  std::string copy_error;
  const double copy_ms = TimeMs(
      [&] { return static_cast<int>(cudaMemcpyAsync(y.get(), x.get(), n * 2, cudaMemcpyDeviceToDevice)); }, o.iters,
      &copy_error);
  if (copy_ms <= 0) {
    std::fprintf(stderr, "cuda_kernels_bench: device-to-device copy failed: %s\n", copy_error.c_str());
    return 1;
  }
  const double copy_gbps = 2.0 * n * 2 / copy_ms / 1e6;

  const auto affine = [&](int64_t channels, int qmin, int qmax) {
    return kc::CudaAffineArgs{1, channels, n / channels, ds.get<float>(), dinv.get<float>(), dz.get<float>(),
                              qmin, qmax, 0, false};
  };
  const kc::CudaAffineArgs int8_rows = affine(rows, -128, 127);
  const kc::CudaAffineArgs uint4_g128 = affine(groups, 0, 15);
  const kc::CudaAffineArgs per_tensor = affine(1, 0, 0);
  const auto grid = [](ElemFormat f) {
    const auto& t = quark::kernels::Traits(f);
    return quark::kernels::GridArgs{t.mbits, t.emin, t.max};
  };
  const auto code = [](ElemFormat f) {
    const quark::kernels::GridConsts g = quark::kernels::MakeGrid(quark::kernels::Traits(f));
    return quark::kernels::GridCodeArgs{g.ebits, g.mbits, g.emin, g.has_nan, g.nan_code};
  };
  const auto mx = [&](ElemFormat f) {
    const auto& t = quark::kernels::Traits(f);
    return kc::CudaMxArgs{rows, cols, grid(f), t.mbits, t.emax, 0, false, 0};
  };
  const kc::CudaElem bf16 = kc::CudaElem::kBF16;
  const int order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  const double bn = 2.0 * n;  // bfloat16 bytes
  const double p_rows = 12.0 * rows, p_groups = 12.0 * groups;
  struct Case {
    const char* kernel;
    double bytes;
    double goal;
    std::function<int()> launch;
  };
  const std::vector<Case> cases = {
      {"int8 fake quant (per channel)", 2 * bn + p_rows, 0.6,
       [&] { return kc::FakeQuantAffineCuda(x.get(), y.get(), bf16, int8_rows, nullptr); }},
      {"int8 codes (per channel)", bn + n + p_rows, 0.6,
       [&] { return kc::QuantizeAffineCuda(x.get(), codes.get<uint8_t>(), bf16, int8_rows, nullptr); }},
      {"uint4 fake quant (g128)", 2 * bn + p_groups, 0.6,
       [&] { return kc::FakeQuantAffineCuda(x.get(), y.get(), bf16, uint4_g128, nullptr); }},
      {"uint4 codes (g128)", bn + n + p_groups, 0.6,
       [&] { return kc::QuantizeAffineCuda(x.get(), codes.get<uint8_t>(), bf16, uint4_g128, nullptr); }},
      {"fp8_e4m3 fake quant (per tensor)", 2 * bn, 0.6,
       [&] { return kc::FakeQuantFloatCuda(x.get(), y.get(), bf16, per_tensor, grid(ElemFormat::kFp8E4M3), nullptr); }},
      {"fp8_e4m3 codes (per tensor)", bn + n, 0.6,
       [&] {
         return kc::QuantizeFloatCuda(x.get(), codes.get<uint8_t>(), bf16, per_tensor, grid(ElemFormat::kFp8E4M3),
                                      code(ElemFormat::kFp8E4M3), nullptr);
       }},
      {"mxfp8_e4m3 fake quant", 2 * bn, 0.3,
       [&] { return kc::FakeQuantMxCuda(x.get(), y.get(), bf16, mx(ElemFormat::kFp8E4M3), nullptr); }},
      {"mxfp4 fake quant", 2 * bn, 0.3,
       [&] { return kc::FakeQuantMxCuda(x.get(), y.get(), bf16, mx(ElemFormat::kFp4E2M1), nullptr); }},
      {"mxfp4 codes + e8m0 scales", bn + n + n / 32.0, 0.3,
       [&] {
         return kc::QuantizeMxCuda(x.get(), codes.get<uint8_t>(), e8m0.get<uint8_t>(), bf16, mx(ElemFormat::kFp4E2M1),
                                   code(ElemFormat::kFp4E2M1), nullptr);
       }},
      {"int4 packing (codes -> int32 words)", 1.5 * n, 0.6,
       [&] { return kc::PackInt4Cuda(codes.get<uint8_t>(), n, order, words.get<int32_t>(), nullptr); }},
      {"fp4 packing (codes -> bytes)", 1.5 * n, 0.3,
       [&] { return kc::PackFp4Cuda(codes.get<uint8_t>(), n, words.get<uint8_t>(), nullptr); }},
  };

  std::vector<Row> table;
  std::printf("cuda_kernels_bench on %s: %lld bfloat16 elements ([%lld, %lld]), %d calls per timing, best of 3\n",
              device.c_str(), static_cast<long long>(n), static_cast<long long>(rows), static_cast<long long>(cols),
              o.iters);
  std::printf("device-to-device copy: %.1f GB/s (read + write of %.0f MiB)\n\n", copy_gbps, n * 2 / 1048576.0);
  std::printf("%-38s %10s %10s %9s %6s %s\n", "kernel", "ms", "GB/s", "of copy", "goal", "");
  for (const Case& c : cases) {
    Row r;
    r.kernel = c.kernel;
    r.dtype = "bfloat16";
    r.bytes = c.bytes;
    r.goal = c.goal;
    r.ms = TimeMs(c.launch, o.iters, &r.error);
    r.fraction = r.ms > 0 ? (r.bytes / r.ms / 1e6) / copy_gbps : 0;
    if (r.ms > 0) {
      std::printf("%-38s %10.4f %10.1f %8.1f%% %5.0f%% %s\n", c.kernel, r.ms, r.bytes / r.ms / 1e6,
                  100 * r.fraction, 100 * r.goal, r.fraction >= r.goal ? "ok" : "BELOW GOAL");
    } else {
      std::printf("%-38s FAILED: %s\n", c.kernel, r.error.c_str());
    }
    table.push_back(r);
  }
  WriteJson(o.json, device, o, copy_gbps, table, "");
  const bool failed = std::any_of(table.begin(), table.end(), [](const Row& r) { return !r.error.empty(); });
  return failed ? 1 : 0;
}
