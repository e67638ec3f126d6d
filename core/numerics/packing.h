// Packing of codes for export and unpacking for the export reader (numerics.md, "Packing for export").
// All functions pack along the last dimension, which must divide by the elements per word.
#pragma once

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"
#include "core/numerics/real_quant.h"

namespace quark {

/// int4 / uint4 codes [..., n] (int8 or uint8, n % 8 == 0) -> int32 [..., n / 8]; nibble i of a word holds element
/// order[i] ([0,2,4,6,1,3,5,7] for reorder, [0..7] for order); signed values masked with 0xF.
absl::StatusOr<at::Tensor> PackInt4(const at::Tensor& codes, PackMethod method);
/// int32 [..., m] -> [..., 8m]: int8 (sign-extended) when `is_signed`, else uint8.
absl::StatusOr<at::Tensor> UnpackInt4(const at::Tensor& words, PackMethod method, bool is_signed);

/// fp4 codes uint8 [..., n] (n even) -> uint8 [..., n / 2], low nibble = even element.
absl::StatusOr<at::Tensor> PackFp4(const at::Tensor& codes);
absl::StatusOr<at::Tensor> UnpackFp4(const at::Tensor& bytes);

/// fp6 codes uint8 [..., n] (n % 4 == 0) -> uint8 [..., 3n / 4]: four codes in three bytes, little-endian bits.
absl::StatusOr<at::Tensor> PackFp6(const at::Tensor& codes);
absl::StatusOr<at::Tensor> UnpackFp6(const at::Tensor& bytes);

/// Power-of-two scales -> uint8 log2(s) + 127; INVALID_ARGUMENT (naming the index and value) for any other value.
absl::StatusOr<at::Tensor> ScaleToE8M0(const at::Tensor& scale);
/// uint8 E8M0 -> float32 2^(e - 127) (255, the E8M0 NaN, gives NaN).
at::Tensor E8M0ToScale(const at::Tensor& e8m0);

/// The export form of real-quantized codes: int4/uint4 packed into int32 (per_group weights transposed first:
/// qweight (in, out/8), scale (in/group, out), zero_point (in/group, out/8); per_channel / per_tensor (out, in/8));
/// int8/uint8/int3/int2 and fp8 codes as they are; fp4 and fp6 packed along the last axis; MX elements packed by
/// element type with E8M0 scales. Integer zero points are int32; float formats and MX carry no zero point
/// (undefined tensor). Per_group int4 needs a 2-D weight grouped along its last axis.
absl::StatusOr<RealQuantized> PackForExport(const RealQuantized& q, const QuantSpec& spec, PackMethod method);

/// Inverse of PackForExport (back to RealQuantized as QuantizeReal gives it; MX and float formats get int32 zero
/// zero points of the param shape).
absl::StatusOr<RealQuantized> UnpackFromExport(const RealQuantized& packed, const QuantSpec& spec, PackMethod method);

}  // namespace quark
