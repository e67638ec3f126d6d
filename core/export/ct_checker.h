// The consumer rules of a compressed-tensors export (formats-2026.md 2), checked in code as the library's pydantic
// models (`extra="forbid"`) and vLLM's compressed_tensors loader read the folder. Independent of the writer: the
// expected tensors follow from the config.json alone. The exporter runs CheckCompressedTensorsExport before publishing.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace quark::exporter {

/// Problems of a `quantization_config` alone, each naming the key path: keys the library's QuantizationScheme /
/// QuantizationArgs forbid, missing required keys, values outside their enums, and QuantizationArgs' validators
/// (strategy vs group_size, token needs dynamic, block <=> block_structure, dynamic only for token/tensor/group/
/// tensor_group, "local" only for tensor_group), a group format other than the compressed ones.
std::vector<std::string> CtQuantizationConfigProblems(const nlohmann::json& qc);

/// Problems of one QuantizationArgs at key path `path` (the checks CtQuantizationConfigProblems runs on every group's
/// weights and activations): keys outside the library's fields, type / strategy / num_bits outside their enums, the
/// library's validators. `activation`: an input or output spec (no actorder).
std::vector<std::string> CtArgsProblems(const nlohmann::json& args, const std::string& path, bool activation);

/// The config group vLLM applies to linear `module` (null JSON when `ignore` names it: exact or "re:" regex; or when no
/// group targets it): as vLLM's find_matched_target, the first exact name or "re:" regex (Python's re.match) over every
/// group in key order, else the first group targeting the class "Linear".
nlohmann::json CtGroupFor(const nlohmann::json& qc, const std::string& module);

/// The scheme class vLLM's `_get_scheme_from_parts` picks for a group (formats-2026.md 2.5): CompressedTensorsWNA16,
/// CompressedTensorsW4A16Fp4, CompressedTensorsW4A4Fp4, CompressedTensorsW8A8Fp8, CompressedTensorsW8A16Fp8,
/// CompressedTensorsW8A8Int8; FAILED_PRECONDITION ("No compressed-tensors compatible scheme was found.") otherwise.
/// `format` is the group's format, else the global one.
absl::StatusOr<std::string> VllmCtScheme(const nlohmann::json& group, const std::string& format);

/// compressed-tensors' MX formats (mxfp4-pack-quantized, mxfp8-quantized): defined by the library, no vLLM scheme.
bool IsCtMxFormat(std::string_view format);

/// #30 item 4: groups an export carries that vLLM's compressed_tensors loader cannot load although the library defines
/// them (mxfp4-pack-quantized, mxfp8-quantized): one line per group, for the log; not refusals.
std::vector<std::string> CtVllmLoadWarnings(const nlohmann::json& qc);

/// Everything above plus the files: every linear of every decoder layer either ignored (float `weight`) or with
/// exactly its format's tensors (names, dtypes, shapes; weight_shape's values), the shards vLLM fuses (FusedGroupKey:
/// q/k/v, gate/up of a dense MLP or shared expert, MLA's q_a_proj/kv_a_proj_with_mqa) in one group or all ignored,
/// NVFP4 weight global scales equal across fused shards (an MoE expert's gate and up too), the MoE blocks' experts
/// under vLLM's fused-MoE rules (ct_moe_rules.h), the routers float and without scales, DeepSeek's MTP linears
/// ignored. FAILED_PRECONDITION listing every problem.
absl::Status CheckCompressedTensorsExport(const std::string& dir);

}  // namespace quark::exporter
