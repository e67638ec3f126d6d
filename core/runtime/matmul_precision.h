// Where bfloat16 matrix products are computed. LibTorch 1.13's CPU bf16 GEMM is a scalar fallback on CPUs
// without native bf16 instructions (AVX512_BF16, AMX): ~50x slower than its float32 GEMM on the same shapes
// (a [2048, 4096] x [4096, 4096] product: ~48 s against ~1 s on this project's 2-core AVX2 machine). There the
// runtime computes bf16 linears and attention products in float32 and rounds the result back to bf16, so a
// bf16 model keeps its dtype contract (bf16 activations in and out of every module) at float32 GEMM speed.
//
// The mode is chosen once per process:
//   QUARK_BF16_MATMUL=native  bf16 operands go to LibTorch's bf16 kernels as they are
//   QUARK_BF16_MATMUL=f32     bf16 operands are widened to float32 for the product
//   unset                     native when /proc/cpuinfo lists avx512_bf16 or amx_bf16, else f32
// Tensors off the CPU always take the native path (GPUs have fast bf16 GEMMs).
#pragma once

#include <optional>
#include <string_view>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"

namespace quark::runtime {

enum class Bf16Matmul {
  kNative,   // LibTorch's bf16 kernels
  kFloat32,  // widen to float32, compute, round the result to bf16
};

/// "native" or "f32". InvalidArgument naming QUARK_BF16_MATMUL and the value otherwise.
absl::StatusOr<Bf16Matmul> ParseBf16Matmul(std::string_view value);

/// kNative when `cpu_flags` (the "flags" line of /proc/cpuinfo) lists avx512_bf16 or amx_bf16, else kFloat32.
Bf16Matmul Bf16MatmulForCpuFlags(std::string_view cpu_flags);

/// The mode for an environment value (nullptr = QUARK_BF16_MATMUL unset) on a CPU with `cpu_flags`: the
/// environment wins when set. Errors as ParseBf16Matmul.
absl::StatusOr<Bf16Matmul> ResolveBf16Matmul(const char* env_value, std::string_view cpu_flags);

/// The process's mode: resolved on first call (thread-safe) from QUARK_BF16_MATMUL and /proc/cpuinfo. An
/// invalid QUARK_BF16_MATMUL is logged (component "runtime") and ignored.
Bf16Matmul ActiveBf16Matmul();

/// Forces the mode (nullopt: back to ActiveBf16Matmul's resolution), so tests can run both paths.
void SetBf16MatmulForTest(std::optional<Bf16Matmul> mode);

/// True when `t` is a CPU bfloat16 tensor and the mode computes bf16 products in float32.
bool MatmulInFloat32(const at::Tensor& t);

/// input [..., in] x weight [out, in]^T + bias [out] (bias may be undefined), in input's dtype. Weight and bias
/// are cast to the compute dtype per call; callers holding a weight across calls keep a Float32Operands instead.
at::Tensor ComputeLinear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias);

/// The float32 copies of one module's weight and bias for its float32-compute products: made on the first call
/// (a calibration pass runs every sample through the same layer, so the cast is paid once per layer, not per
/// sample) and kept until Reset(). Not thread-safe.
class Float32Operands {
 public:
  /// at::linear(input, weight, bias) computed in float32 from the cached copies, in input's dtype. `weight` and
  /// `bias` must be the tensors the copies were made from since the last Reset().
  at::Tensor Linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias);
  void Reset();

 private:
  at::Tensor weight_, bias_;
};

}  // namespace quark::runtime
