// #36 item 5: the `targets` of a mixed recipe's compressed-tensors config groups and the rule vLLM puts on them.
// llm-compressor's non-uniform recipes name their groups' modules with "re:" patterns ("re:.*mlp.down_proj"); the
// library and vLLM match a target as Python's re.match does (anchored at the start only) or as an exact name, and
// vLLM takes the first target, over every group in order, that matches a module (compressed_tensors/utils.py
// find_matched_target). vLLM loads q/k/v, gate/up and MLA's q_a/kv_a as one fused linear whose scheme is the first
// shard's (FusedGroupKey), so those shards must share one scheme (and be all ignored or none).
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/config/layer_plan.h"

namespace quark::exporter {

/// compressed-tensors' and vLLM's match of one target or ignore entry against a module name: "re:<regex>" as Python's
/// re.match (from the start, any end), else the exact name. "Linear" (a class name) is not a name match.
bool CtNameMatches(const std::string& target, const std::string& module);

/// The shards vLLM fuses (FusedGroupKey: q/k/v -> qkv_proj, gate/up -> gate_up_proj of a dense MLP or a shared
/// expert, q_a_proj/kv_a_proj_with_mqa -> fused_qkv_a_proj) of each decoder layer in `plan`, each with the
/// layer config it resolves to (the KV cache's output spec aside) and whether it is ignored: INVALID_ARGUMENT naming
/// both modules and the plan entries that decided them when two shards differ, before any work.
absl::Status CheckCtFusedShards(const Config& config, const LayerPlan& plan);

/// The targets of each group (`groups[i]`: its modules in plan order) among the model's linears `linears` (every
/// Linear of the plan, ignored ones too): per group, one "re:" pattern per module suffix that the group holds in
/// every decoder layer ("re:.*\.mlp\.down_proj$"), one per set of layers sharing their suffixes otherwise
/// ("re:model\.layers\.(?:0|3)\.(?:self_attn\.q_proj|self_attn\.k_proj)$"), exact names outside the decoder layers.
/// The patterns are checked against `linears` as vLLM resolves them (every module reaches its own group's target
/// first, an ignored one none); should that fail, every group lists its exact module names instead.
std::vector<std::vector<std::string>> CtGroupTargets(const std::vector<std::vector<std::string>>& groups,
                                                     const std::vector<std::string>& linears);

}  // namespace quark::exporter
