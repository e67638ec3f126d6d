#include "worker/throughput_probe.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <vector>

#include <ATen/ATen.h>

#include "core/algorithms/linalg.h"
#include "core/base/log.h"
#include "core/engine/engine_init.h"
#include "core/numerics/fake_quant.h"
#include "core/numerics/real_quant.h"

namespace quark::worker {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Runs `kernel` until kMinProbeSeconds have passed (at least three times) and returns the median run's seconds:
// on a shared host a job meets the typical contention, not the quietest moment.
template <typename Kernel>
double MedianSeconds(Kernel kernel) {
  std::vector<double> runs;
  const auto start = Clock::now();
  while (runs.size() < 3 || Since(start) < kMinProbeSeconds) {
    const auto t = Clock::now();
    kernel();
    runs.push_back(Since(t));
  }
  std::nth_element(runs.begin(), runs.begin() + runs.size() / 2, runs.end());
  return runs[runs.size() / 2];
}

// Sizes: large enough to leave the caches, as a 7B layer's products and an 11008-wide Hessian do.
double GemmFlops() {
  constexpr int64_t n = 2048;
  at::Tensor a = at::randn({n, n}), b = at::randn({n, n});
  const double seconds = MedianSeconds([&] { at::mm(a, b); });
  return 2.0 * n * n * n / seconds;
}

// GPTQ's chain on one Hessian, as the engine runs it (core/algorithms/linalg.h: Cholesky factor, its inverse, the
// upper factor of the inverse). Counted as the estimator counts it (1.35 x n^3), so the rate and the model agree by
// construction.
double CholeskyFlops() {
  constexpr int64_t n = 2048;
  at::Tensor x = at::randn({n, 2 * n});
  at::Tensor h = at::mm(x, x.t()) + at::eye(n) * static_cast<double>(n);
  const double seconds = MedianSeconds([&] { (void)algorithms::UpperCholeskyOfInverse(h); });
  return 1.35 * n * n * n / seconds;
}

// Asymmetric uint4 per group of 128, as the engine's fake quantization computes it (scale, zero point, round,
// clamp, dequantize): the memory-bound part of quantizing a weight.
double FakeQuantBytesPerSecond() {
  constexpr int64_t rows = 1024, cols = 4096, group = 128;
  at::Tensor w = at::randn({rows, cols});
  const double seconds = MedianSeconds([&] {
    at::Tensor g = w.reshape({-1, group});
    at::Tensor lo = std::get<0>(g.min(1, true)), hi = std::get<0>(g.max(1, true));
    at::Tensor scale = ((hi - lo) / 15.0).clamp_min(1e-8);
    at::Tensor zero = (-lo / scale).round();
    at::Tensor q = (g / scale + zero).round().clamp(0, 15);
    ((q - zero) * scale).reshape({rows, cols});
  });
  return 4.0 * rows * cols / seconds;
}

// The engine's own fp8 (e4m3, per tensor) codes for a weight, as the export computes them: float formats have no
// vectorized code path there, so they cost more than the fake quantization above.
double FloatCodesBytesPerSecond() {
  constexpr int64_t rows = 512, cols = 4096;
  at::Tensor w = at::randn({rows, cols});
  QuantSpec spec;
  spec.dtype = DType::kFp8E4M3;
  spec.qscheme = QScheme::kPerTensor;
  absl::StatusOr<QuantParams> params = ParamsOf(w, spec, TensorRole::kWeight);
  if (!params.ok()) return 0;
  bool ok = true;
  const double seconds = MedianSeconds([&] { ok &= QuantizeReal(w, spec, *params).ok(); });
  return ok ? 4.0 * rows * cols / seconds : 0;
}

// Writes 64 MiB with fdatasync and reads it back (from the page cache, as a freshly written or recently used
// model is read); {write, read} bytes/s, 0 when the folder cannot be written.
std::pair<double, double> DiskRates(const std::string& data_dir) {
  constexpr size_t kBytes = 64u << 20;
  std::error_code ec;
  std::filesystem::create_directories(data_dir, ec);
  const std::string path = data_dir + "/.throughput_probe." + std::to_string(getpid());
  std::vector<char> buffer(kBytes, 'q');
  const auto write_start = Clock::now();
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return {0, 0};
  size_t done = 0;
  while (done < kBytes) {
    const ssize_t n = write(fd, buffer.data() + done, kBytes - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  fdatasync(fd);
  close(fd);
  const double write_seconds = Since(write_start);
  double read_seconds = 1e30;
  for (int run = 0; run < 2; ++run) {
    const auto t = Clock::now();
    std::ifstream in(path, std::ios::binary);
    in.read(buffer.data(), static_cast<std::streamsize>(kBytes));
    read_seconds = std::min(read_seconds, Since(t));
  }
  std::filesystem::remove(path, ec);
  if (done < kBytes) return {0, 0};
  return {kBytes / write_seconds, kBytes / read_seconds};
}

}  // namespace

int64_t HostMemoryBytes() {
  int64_t bytes = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  std::ifstream limit("/sys/fs/cgroup/memory.max");
  int64_t cgroup = 0;
  if (limit >> cgroup && cgroup > 0 && cgroup < bytes) bytes = cgroup;  // "max" does not parse: no limit
  return bytes;
}

quark::v1::internal::WorkerThroughput MeasureThroughput(const std::string& data_dir) {
  const auto start = Clock::now();
  quark::v1::internal::WorkerThroughput t;
  at::manual_seed(0);
  t.set_threads(EngineThreads());
  t.set_gemm_gflops(GemmFlops() / 1e9);
  t.set_cholesky_gflops(CholeskyFlops() / 1e9);
  t.set_fake_quant_bytes_per_s(FakeQuantBytesPerSecond());
  t.set_float_codes_bytes_per_s(FloatCodesBytesPerSecond());
  const auto [write, read] = DiskRates(data_dir);
  t.set_disk_write_bytes_per_s(write);
  t.set_disk_read_bytes_per_s(read);
  t.set_host_memory_bytes(HostMemoryBytes());
  t.set_gpu_memory_bytes(0);  // the engine is LibTorch's CPU build
  t.set_device("cpu");
  t.set_probe_seconds(Since(start));
  log::Get("worker")->info(
      "throughput probe ({:.1f} s, {} threads): GEMM {:.1f} GFLOP/s, Cholesky {:.1f} GFLOP/s, fake-quant {:.2f} GB/s, "
      "fp8 codes {:.2f} GB/s, "
      "disk write {:.0f} MB/s read {:.0f} MB/s, memory {:.1f} GiB",
      t.probe_seconds(), t.threads(), t.gemm_gflops(), t.cholesky_gflops(), t.fake_quant_bytes_per_s() / 1e9,
      t.float_codes_bytes_per_s() / 1e9,
      t.disk_write_bytes_per_s() / 1e6, t.disk_read_bytes_per_s() / 1e6, t.host_memory_bytes() / double(1 << 30));
  return t;
}

}  // namespace quark::worker
