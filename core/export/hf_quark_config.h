// The quantization config an HF-quark export declares (#30): the engine's Config with each spec in the spelling AMD
// Quark's importer and vLLM's quark loader read, where the engine quantizes with another spelling of the same format.
// Only the config changes: the tensors (hf_quark_tensor_plan.h) are those of the engine's spelling, byte for byte.
#pragma once

#include "core/config/quant_spec.h"

namespace quark::exporter {

/// `config` as an HF-quark export writes it in config.json:
///  - an OCP MXFP8 weight (fp8_e4m3 per_group 32 along the input, E8M0 scales) as E8M0 tiles per_block [1, 32]
///    (scale_type float8_e8m0fnu, scale_format e8m0): Quark's importer dequantizes fp8 per_tensor / per_channel /
///    per_block only ("Unsupported QuantSchema: per_group for quant_dtype: fp8_e4m3"), and vLLM loads Quark's MXFP8
///    only as QuarkW8A8Mxfp8 (dispatch step 0: per_block [R, 32], uint8 E8M0 scales [N / R, K / 32]); with R = 1 the
///    tiles are MXFP8's blocks of 32. The MX fp8 input stays per_group 32 (step 0's input, vLLM's kMxfp8Dynamic).
///  - MXINT8 (int8 with E8M0 scales of 32) as Quark's OCP_MXINT8Spec: dtype mx, mx_element_dtype int8.
/// Every other spec is unchanged.
Config HfQuarkExportConfig(const Config& config);

}  // namespace quark::exporter
