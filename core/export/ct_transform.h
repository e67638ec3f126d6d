// #35 item 4: compressed-tensors' transform_config (compressed_tensors/transform: TransformConfig, TransformScheme,
// TransformArgs) for the rotation's R4, as llm-compressor's SpinQuant R4 writes it and vLLM's compressed_tensors path
// reads it (CompressedTensorsLinearTransformMethod): an online `input` Hadamard on each down_proj, its inverse fused
// into the weight (`weight_input`, inverse), the matrix stored per module as `<module>.R4_input.weight` (the
// unnormalised +-1 matrix, [in_features, in_features]; the library's HadamardTransform and vLLM divide by sqrt(n)).
//
// The scheme type is "random-hadamard": vLLM computes every type but "hadamard" as a dense product with the stored
// matrix, while "hadamard" means Sylvester's matrix computed by its hadacore kernel (powers of two only); the engine's
// Hadamard of a width like 768 = 12 * 64 or 11008 = 172 * 64 is not Sylvester's, so the stored matrix must be used.
// JSON only (no LibTorch): the config writer, the reader and the checker share it.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace quark::exporter {

/// The config group name of R4 (llm-compressor's SpinQuant names its schemes R1..R4).
inline constexpr char kCtR4Scheme[] = "R4";

/// The transform_config of R4, keys sorted (ModelCompressor.update_config dumps with sort_keys): {"config_groups":
/// {"R4": {"apply": [{"ignore": [], "inverse": false, "location": "input", "targets": ["re:.*mlp.down_proj$"]},
/// {"ignore": [], "inverse": true, "location": "weight_input", "targets": [...]}], "head_dim": null, "precision":
/// "torch.float32", "randomize": false, "requires_grad": false, "type": "random-hadamard"}}}.
nlohmann::json CtR4TransformConfig();

/// `<module>.<scheme>_<location>.weight`: where the library registers a transform's matrix (TransformFactory's
/// `f"{self.name}_{args.location}"` submodule of the target) and vLLM loads it from.
std::string CtTransformWeightName(const std::string& module, const std::string& scheme, const std::string& location);

/// One online input transform of a transform_config.
struct CtInputTransform {
  std::string scheme;  // the config group name ("R4")
  std::string type;    // "hadamard" or "random-hadamard"
  std::vector<std::string> targets, ignore;
};

/// The online `input` transforms of `transform_config` (null or {} gives none). The offline locations (weight_input,
/// weight_output) are skipped: they are fused into the stored weights, and vLLM skips them too. Refused, naming the
/// key path under transform_config: a TransformScheme or TransformArgs key the library forbids (extra="forbid"), a
/// type other than hadamard / random-hadamard (UNIMPLEMENTED: no dense matrix or a learned one), randomize (the
/// permutation is not read), head_dim (block-diagonal), an online location vLLM does not apply to linears (q_attn,
/// k_cache: "not implemented yet" there) or this engine does not (output), inverse on an online input.
absl::StatusOr<std::vector<CtInputTransform>> CtInputTransforms(const nlohmann::json& transform_config);

/// The input transform that targets linear `module` (the library's is_match: a "re:" pattern, the exact name, or the
/// class "Linear"; `ignore` likewise), nullptr when none. vLLM allows one input transform per linear: the first wins.
const CtInputTransform* CtInputTransformFor(const std::vector<CtInputTransform>& transforms, const std::string& module);

}  // namespace quark::exporter
