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

quark::kernels::GridArgs Grid(ElemFormat f) {
  const auto& t = quark::kernels::Traits(f);
  return quark::kernels::GridArgs{t.mbits, t.emin, t.max};
}

quark::kernels::GridCodeArgs Code(ElemFormat f) {
  const quark::kernels::GridConsts g = quark::kernels::MakeGrid(quark::kernels::Traits(f));
  return quark::kernels::GridCodeArgs{g.ebits, g.mbits, g.emin, g.has_nan, g.nan_code};
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

// The device data of one run: [rows, 4096] bfloat16 input, output, codes, scales, packed words, and parameters for
// up to one group of 128 elements each (scale, 1/scale, zero point).
struct BenchData {
  explicit BenchData(int64_t n)
      : n(n), rows(n / kCols), groups(n / 128), x(n * 2), y(n * 2), codes(n), e8m0(n / 32 + rows), words(n / 2),
        scale(groups * 4), inv(groups * 4), zero(groups * 4) {}
  bool Upload() const {
    const std::vector<uint16_t> host = Bf16Inputs(n);
    const std::vector<float> s(static_cast<size_t>(groups), 0.05f), i(s.size(), 20.0f), z(s.size(), 8.0f);
    return Check(cudaMemcpy(x.get(), host.data(), n * 2, cudaMemcpyHostToDevice), "upload") &&
           Check(cudaMemcpy(scale.get(), s.data(), groups * 4, cudaMemcpyHostToDevice), "upload") &&
           Check(cudaMemcpy(inv.get(), i.data(), groups * 4, cudaMemcpyHostToDevice), "upload") &&
           Check(cudaMemcpy(zero.get(), z.data(), groups * 4, cudaMemcpyHostToDevice), "upload");
  }
  kc::CudaAffineArgs Affine(int64_t channels, int qmin, int qmax) const {
    return kc::CudaAffineArgs{1, channels, n / channels, scale.get<float>(), inv.get<float>(), zero.get<float>(),
                              qmin, qmax, 0, false};
  }
  kc::CudaMxArgs Mx(ElemFormat f) const {
    const auto& t = quark::kernels::Traits(f);
    return kc::CudaMxArgs{rows, kCols, Grid(f), t.mbits, t.emax, 0, false, 0};
  }
  static constexpr int64_t kCols = 4096;
  const int64_t n, rows, groups;
  Buffer x, y, codes, e8m0, words, scale, inv, zero;
};

struct Case {
  const char* kernel;
  double bytes;  // read + written per call
  double goal;   // fraction of the copy
  std::function<int()> launch;
};

// Every kernel on bfloat16 data: per-channel int8, uint4 with groups of 128, per-tensor fp8, MX, packing.
std::vector<Case> KernelCases(const BenchData& d) {
  const double n = static_cast<double>(d.n), bn = 2.0 * n;
  const double p_rows = 12.0 * d.rows, p_groups = 12.0 * d.groups;
  const kc::CudaElem bf16 = kc::CudaElem::kBF16;
  const kc::CudaAffineArgs int8 = d.Affine(d.rows, -128, 127), uint4 = d.Affine(d.groups, 0, 15),
                           tensor = d.Affine(1, 0, 0);
  const ElemFormat fp8 = ElemFormat::kFp8E4M3, fp4 = ElemFormat::kFp4E2M1;
  uint8_t* codes = d.codes.get<uint8_t>();
  return {
      {"int8 fake quant (per channel)", 2 * bn + p_rows, 0.6,
       [=, &d] { return kc::FakeQuantAffineCuda(d.x.get(), d.y.get(), bf16, int8, nullptr); }},
      {"int8 codes (per channel)", bn + n + p_rows, 0.6,
       [=, &d] { return kc::QuantizeAffineCuda(d.x.get(), codes, bf16, int8, nullptr); }},
      {"uint4 fake quant (g128)", 2 * bn + p_groups, 0.6,
       [=, &d] { return kc::FakeQuantAffineCuda(d.x.get(), d.y.get(), bf16, uint4, nullptr); }},
      {"uint4 codes (g128)", bn + n + p_groups, 0.6,
       [=, &d] { return kc::QuantizeAffineCuda(d.x.get(), codes, bf16, uint4, nullptr); }},
      {"fp8_e4m3 fake quant (per tensor)", 2 * bn, 0.6,
       [=, &d] { return kc::FakeQuantFloatCuda(d.x.get(), d.y.get(), bf16, tensor, Grid(fp8), nullptr); }},
      {"fp8_e4m3 codes (per tensor)", bn + n, 0.6,
       [=, &d] { return kc::QuantizeFloatCuda(d.x.get(), codes, bf16, tensor, Grid(fp8), Code(fp8), nullptr); }},
      {"mxfp8_e4m3 fake quant", 2 * bn, 0.3,
       [=, &d] { return kc::FakeQuantMxCuda(d.x.get(), d.y.get(), bf16, d.Mx(fp8), nullptr); }},
      {"mxfp4 fake quant", 2 * bn, 0.3,
       [=, &d] { return kc::FakeQuantMxCuda(d.x.get(), d.y.get(), bf16, d.Mx(fp4), nullptr); }},
      {"mxfp4 codes + e8m0 scales", bn + n + n / 32, 0.3,
       [=, &d] {
         return kc::QuantizeMxCuda(d.x.get(), codes, d.e8m0.get<uint8_t>(), bf16, d.Mx(fp4), Code(fp4), nullptr);
       }},
      {"int4 packing (codes -> int32 words)", 1.5 * n, 0.6,
       [=, &d] {
         static const int kOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};
         return kc::PackInt4Cuda(codes, d.n, kOrder, d.words.get<int32_t>(), nullptr);
       }},
      {"fp4 packing (codes -> bytes)", 1.5 * n, 0.3,
       [=, &d] { return kc::PackFp4Cuda(codes, d.n, d.words.get<uint8_t>(), nullptr); }},
  };
}

Row Measure(const Case& c, int iters, double copy_gbps) {
  Row r;
  r.kernel = c.kernel;
  r.dtype = "bfloat16";
  r.bytes = c.bytes;
  r.goal = c.goal;
  r.ms = TimeMs(c.launch, iters, &r.error);
  r.fraction = r.ms > 0 ? (r.bytes / r.ms / 1e6) / copy_gbps : 0;
  if (r.ms > 0) {
    std::printf("%-38s %10.4f %10.1f %8.1f%% %5.0f%% %s\n", c.kernel, r.ms, r.bytes / r.ms / 1e6, 100 * r.fraction,
                100 * r.goal, r.fraction >= r.goal ? "ok" : "BELOW GOAL");
  } else {
    std::printf("%-38s FAILED: %s\n", c.kernel, r.error.c_str());
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = Parse(argc, argv);
  if (kc::CudaDeviceCount() == 0) {
    const std::string why = "no CUDA device on this machine: nothing measured";
    std::printf("cuda_kernels_bench: %s\n", why.c_str());
    WriteJson(o.json, "none", o, 0, {}, why);
    // scripts/gpu/run.sh sets QUARK_EXPECT_CUDA on a machine with a GPU: there, not seeing it is an error.
    return std::getenv("QUARK_EXPECT_CUDA") != nullptr ? 1 : 0;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  const std::string device =
      std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ")";
  const BenchData d(o.elements);
  if (!d.Upload()) return 1;

  std::string copy_error;
  const double copy_ms = TimeMs(
      [&] { return static_cast<int>(cudaMemcpyAsync(d.y.get(), d.x.get(), d.n * 2, cudaMemcpyDeviceToDevice)); },
      o.iters, &copy_error);
  if (copy_ms <= 0) {
    std::fprintf(stderr, "cuda_kernels_bench: device-to-device copy failed: %s\n", copy_error.c_str());
    return 1;
  }
  const double copy_gbps = 2.0 * d.n * 2 / copy_ms / 1e6;
  std::printf("cuda_kernels_bench on %s: %lld bfloat16 elements ([%lld, %lld]), %d calls per timing, best of 3\n",
              device.c_str(), static_cast<long long>(d.n), static_cast<long long>(d.rows),
              static_cast<long long>(BenchData::kCols), o.iters);
  std::printf("device-to-device copy: %.1f GB/s (read + write of %.0f MiB)\n\n", copy_gbps, d.n * 2 / 1048576.0);
  std::printf("%-38s %10s %10s %9s %6s\n", "kernel", "ms", "GB/s", "of copy", "goal");
  std::vector<Row> table;
  for (const Case& c : KernelCases(d)) table.push_back(Measure(c, o.iters, copy_gbps));
  WriteJson(o.json, device, o, copy_gbps, table, "");
  const bool failed = std::any_of(table.begin(), table.end(), [](const Row& r) { return !r.error.empty(); });
  return failed ? 1 : 0;
}
