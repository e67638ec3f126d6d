// compressed-tensors' `quantization_config` (formats-2026.md 2.1-2.2) as llm-compressor writes it for a Config: one
// config group per distinct layer config (targets "Linear" when one config covers every quantized linear, else "re:"
// patterns of the group's modules, ct_targets.h), the format each group's tensors are stored in, `ignore`,
// `kv_cache_scheme`. Schemes compressed-tensors cannot express, and fused shards (q/k/v, gate/up) in different
// schemes, are refused before any work, naming the field or the modules.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/config/layer_plan.h"
#include "core/config/quant_spec.h"
#include <nlohmann/json.hpp>

namespace quark::exporter {

/// The library version written as `version`: compressed-tensors @ ac8e2ba8 (formats-2026.md), tagged 0.18.0 (a release
/// build of it reports that; ct_peer_test compares it with the library's __version__).
inline constexpr const char* kCompressedTensorsVersion = "0.18.0";

/// QuantizationArgs of one tensor spec (num_bits, type, symmetric, strategy, group_size, block_structure, dynamic,
/// actorder, observer, scale_dtype / zp_dtype where the format needs them). `path` names the field in errors.
absl::StatusOr<nlohmann::json> CtQuantizationArgs(const QuantSpec& spec, bool is_weight, const std::string& path);

/// The compression format of a layer config: pack-quantized, int-quantized, float-quantized, nvfp4-pack-quantized,
/// mxfp4-pack-quantized or mxfp8-quantized (compressed-tensors' infer_module_format order).
absl::StatusOr<std::string> CtFormatOf(const LayerQuantConfig& config, const std::string& path);

/// Whether this engine writes tensors of `format` (one of ct_layout.cc's families; ct_export_test checks the two
/// lists agree). mxfp4-pack-quantized and mxfp8-quantized are not written yet.
bool CtFormatIsWritten(std::string_view format);

/// The rules of one layer config that need no model, as SubmitJob checks them: its format (UNIMPLEMENTED naming
/// `path` when the engine does not write it), the QuantizationArgs of its weight and input, no quantized bias.
/// INVALID_ARGUMENT naming the field for what compressed-tensors cannot express. Output quantization (only the KV
/// cache may have it) and the model's own rules (MoE) are checked when the export starts.
absl::Status CheckCtLayerConfig(const LayerQuantConfig& config, const std::string& path);

/// The whole quantization_config (keys sorted, as json.dump(sort_keys=True) writes them) for the plan's quantized
/// linears. INVALID_ARGUMENT naming the field for what compressed-tensors cannot carry.
absl::StatusOr<nlohmann::json> CompressedTensorsConfig(const Config& config, const LayerPlan& plan);

}  // namespace quark::exporter
