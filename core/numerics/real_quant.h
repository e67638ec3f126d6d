// Real quantization for export: integer / float-format codes plus scales and zero points, and the inverse.
#pragma once

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"
#include "core/numerics/quant_params.h"
#include "core/numerics/tensor_role.h"

namespace quark {

/// Unpacked codes, one per element, in x's shape:
///   signed integers (int8/int4/int3/int2): int8 values; uint8/uint4: uint8 values;
///   fp8/fp6/fp4 and MX float elements: uint8 bit patterns (low bits); MXINT8: int8 values.
/// scale / zero_point: as QuantParams (param shape), except MX where `scale` is uint8 E8M0 (log2(s) + 127) and
/// zero_point is int32 zeros.
struct RealQuantized {
  at::Tensor codes;
  at::Tensor scale;
  at::Tensor zero_point;
  /// NVFP4 only: float32 global scale, shape (); `scale` is then the uint8 bytes of the float8_e4m3fn block scales.
  at::Tensor global_scale;
};

/// q = clamp(round(x * (1/s) + z), qmin, qmax) (integers) or the format codes of clamp(x / s, +-fmax) (floats).
/// MX computes its block scales from x (params ignored, may be empty). Dequantize(QuantizeReal(x)) equals
/// FakeQuantize(x) bit for bit for finite x, except where an integer zero point moves a rounding: FakeQuantize
/// rounds x / s before adding z (numerics.md), so a tie x / s = k + 0.5 (half_even: z odd; round: the sum changes
/// sign) or, for floor, a fraction the float32 add loses gives codes one apart. Errors: INVALID_ARGUMENT naming the
/// field.
absl::StatusOr<RealQuantized> QuantizeReal(const at::Tensor& x, const QuantSpec& spec, const QuantParams& params,
                                           TensorRole role = TensorRole::kWeight);

/// Values of `q` in `dtype` (float32, bfloat16 or float16).
absl::StatusOr<at::Tensor> Dequantize(const RealQuantized& q, const QuantSpec& spec, at::ScalarType dtype,
                                      TensorRole role = TensorRole::kWeight);

}  // namespace quark
