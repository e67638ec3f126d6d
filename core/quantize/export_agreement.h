// How far the export's weight is from the fake-quantized weight the in-memory model ran (ppl_after).
//
// numerics.md, as Quark: fake quantization rounds x / s and then adds the zero point, real (export) quantization
// rounds x / s + z. The two give different codes where that sum rounds differently: a tie (x / s exactly k + 0.5:
// half_even lands on the other even neighbour once z is odd, round when adding z changes the sign) or, for floor,
// a fraction lost in the float32 add (x / s = -1.0000001, z = 8: floor gives -2 + 8 = 6, the export floor(7.0) = 7).
// Unclipped weights hit this rarely (tinyllama-a, RTN uint4 per channel: 1 of 3,145,728 elements); AWQ's clip makes
// it systematic (577 there): a row clipped to [-c, c] has c / s exactly 7.5 for uint4 (z = 7), so every element at
// +c is a tie that the fake-quantized model rounds up to 8 s and the export down to 7 s. The count tells a user why
// ppl_reloaded (what a server runs) and ppl_after differ, and any count under a symmetric spec (z = 0, no such
// element) would be a bug.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "core/export/hf_quark_layout.h"

namespace quark::quantize {

/// Elements where Dequantize(data.weight_codes), in data.weight's dtype, is not bit for bit data.weight (the frozen,
/// fake-quantized weight); 0 without codes (a cast spec). INVALID_ARGUMENT naming the module when the codes do
/// not dequantize to the weight's shape.
absl::StatusOr<int64_t> ExportWeightDifferences(const exporter::LinearExportData& data);

}  // namespace quark::quantize
