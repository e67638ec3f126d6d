// What an automatic-quantization search chooses among: candidate schemes (presets) and the linear groups of the
// decoder layers (fused shards together: q/k/v, gate/up), with the size each candidate gives each group by the
// estimator's arithmetic (core/estimate/artifact_size.h, HF-quark tensors: codes, scales, zero points, static
// activation scales).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checkpoint/dtype.h"
#include "core/config/layer_plan.h"
#include "core/config/quant_spec.h"

namespace quark::search {

/// A scheme the search may give a group: a preset's name and its global_quant_config.
struct Candidate {
  std::string name;
  LayerQuantConfig config;
};

/// The presets named in `names`, in order. INVALID_ARGUMENT naming `field`: an empty list, an unknown name
/// (`field`[i], with the preset lookup's suggestions), a name given twice, or a preset without a weight spec.
absl::StatusOr<std::vector<Candidate>> ResolveCandidates(const std::vector<std::string>& names,
                                                         const std::string& field);

/// "uint4_wo_128,int8" -> {"uint4_wo_128", "int8"} (empty items dropped, spaces trimmed).
std::vector<std::string> SplitCandidateList(const std::string& list);

/// The linears of one fused group of one decoder layer, which the search gives one scheme.
struct LinearGroup {
  std::string name;                 // "model.layers.0.self_attn.qkv", "model.layers.0.self_attn.o_proj"
  int64_t layer = -1;               // decoder layer index
  std::vector<ModuleInfo> modules;  // in model order
  int64_t params = 0;               // weights of its linears
};

/// The decoder layers' Linear modules (weight [out, in]) grouped by FusedGroupKey, in model order;
/// lm_head and embeddings are not searched (the exporters keep them float).
std::vector<LinearGroup> DecoderLinearGroups(const std::vector<ModuleInfo>& modules);

/// Bits of a group's HF-quark tensors (weights, scales, zero points, activation scales; no bias) with `config`.
double GroupBits(const LinearGroup& group, const LayerQuantConfig& config, checkpoint::StDType model_dtype);

}  // namespace quark::search
