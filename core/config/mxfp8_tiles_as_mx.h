// #30: the quantization_config an HF-quark export of OCP MXFP8 declares, fed back as a job's config.
//
// The export writes an MXFP8 weight as E8M0 tiles per_block [1, 32] (exporter::HfQuarkExportConfig: what vLLM's
// QuarkW8A8Mxfp8 dispatches on and what Quark's importer dequantizes) beside its MX fp8_e4m3 per_group 32 dynamic
// input. Both consumers compute that pair as MXFP8: vLLM's QuarkW8A8Mxfp8 takes the weight as kMxfp8Static (uint8
// E8M0 scales per 1 x 32) and quantizes the activations as kMxfp8Dynamic (E8M0 scales per 1 x 32, whatever the input
// spec's scale format); Quark reads the input spec with its PerBlockMXObserver. So such a layer means the engine's
// mxfp8 preset and is resolved to it: the weight spelled back as OCP MX (per_group 32 on the input axis, the MX block
// observer), whose export writes the same tiles again, byte for byte, and whose content key is the preset's (a job
// fed its own export's config is deduplicated against the preset's job).
//
// Only that exact pair is rewritten; any other E8M0-tile layer is left as it is, for ValidateConfig (E8m0TileIssues)
// to accept or refuse naming the field.
#pragma once

#include "core/config/quant_spec.h"

namespace quark {

/// Whether `layer` is an exported MXFP8 layer: weight E8M0 tiles [1, 32] (fp8_e4m3, symmetric, static, min_max) with
/// an MX fp8_e4m3 input per_group 32 along the last axis, dynamic.
bool IsExportedMxfp8Layer(const LayerQuantConfig& layer);

/// `config` with every exported MXFP8 layer's weight spelled as OCP MX (the mxfp8 preset's weight); every other spec
/// unchanged. Applied where a job's config is resolved (ResolveConfigChoice; the server's ResolveRequestConfig).
Config WithExportedMxfp8AsMx(Config config);

}  // namespace quark
