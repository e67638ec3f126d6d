// A worker's measured rates (worker/throughput_probe.h measures them at start; WorkerThroughput in worker.proto
// carries them to quarkd). Plain numbers, so the estimator needs neither gRPC nor LibTorch.
#pragma once

#include <cstdint>
#include <string>

namespace quark::estimate {

struct Throughput {
  int threads = 1;
  double gemm_flops = 0;              // float32 matrix product, FLOP/s
  double cholesky_flops = 0;          // Cholesky factor + triangular inverse, FLOP/s
  double fake_quant_bytes_per_s = 0;  // float32 bytes through a per-group fake quantization
  /// float32 bytes the engine turns into fp8 codes: float formats (fp8/fp6/fp4) have no vectorized code path for
  /// the export's real quantization, so their export pass runs at this rate instead of the fake-quant one.
  double float_codes_bytes_per_s = 0;
  double disk_write_bytes_per_s = 0;
  double disk_read_bytes_per_s = 0;
  uint64_t host_memory_bytes = 0;     // 0 = unknown
  uint64_t gpu_memory_bytes = 0;      // 0 = no GPU
  std::string device = "cpu";         // "cpu" or "cuda"
  /// What one small device operation costs beyond its work (a GPU's kernel launch and the host's dispatch): GPTQ's
  /// column loop on a GPU is about kGptqOpsPerColumn of them a column (gptq_tensor_ops.cc), launch-bound rather
  /// than FLOP-bound. 0 on the CPU, whose column loop is modelled by its FLOPs.
  double device_op_seconds = 0;
};

/// Rates of one H200 for the engine's float32 device path. Measured there on 2026-11-29 (LibTorch 2.11, CUDA 13;
/// docs/gpu.md "The H200 run"): float32 GEMM without TF32 51.1 TFLOP/s (scripts/gpu/device_rates.py); GPTQ's
/// factor chain (Cholesky, inverse, upper Cholesky) on a 4096 x 4096 Hessian 0.070 s, 1.3 TFLOP/s; its column loop
/// 0.73-0.77 s for 4096 columns, 18.5 us per small operation at kGptqOpsPerColumn a column (gptq_cuda_test); the
/// CUDA fake-quant kernels move 490-730 GB/s (cuda_kernels_bench, bfloat16). Not measured there yet: the disks (the
/// reference machine's rates stand in).
inline Throughput NominalH200Throughput() {
  Throughput t;
  t.threads = 16;
  t.gemm_flops = 51e12;
  t.cholesky_flops = 1.3e12;
  t.fake_quant_bytes_per_s = 480e9;
  t.float_codes_bytes_per_s = 480e9;
  t.disk_write_bytes_per_s = 500e6;
  t.disk_read_bytes_per_s = 1.5e9;
  t.host_memory_bytes = 128ull << 30;
  t.gpu_memory_bytes = 141ull * 1000 * 1000 * 1000;
  t.device = "cuda";
  t.device_op_seconds = 18.5e-6;
  return t;
}

/// The rates of the 2-core VM the figures of docs/results.md come from, measured by worker/throughput_probe at
/// one thread (the estimate ValidateConfig gives when no worker is registered, with a warning saying so).
inline Throughput ReferenceThroughput() {
  Throughput t;
  t.threads = 1;
  t.gemm_flops = 45e9;
  t.cholesky_flops = 20e9;
  t.fake_quant_bytes_per_s = 1.0e9;
  t.float_codes_bytes_per_s = 0.3e9;
  t.disk_write_bytes_per_s = 500e6;
  t.disk_read_bytes_per_s = 1.5e9;
  return t;
}

}  // namespace quark::estimate
