// Which quantization config each module of a model gets: layer_quant_config pattern (first match),
// then layer_type_quant_config, then global_quant_config; exclude patterns win over all three.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/config/quant_spec.h"

namespace quark {

/// A quantizable module of a model, as read from its checkpoint (no weights needed).
struct ModuleInfo {
  std::string name;                   // HF name, e.g. "model.layers.0.mlp.down_proj"
  std::string type;                   // "Linear", "Embedding", "EmbeddingBag", "Conv2d", "ConvTranspose2d"
  std::vector<int64_t> weight_shape;  // Linear: [out_features, in_features]
};

/// Where a module's config came from.
enum class ConfigSource {
  kLayerPattern,
  kLayerType,
  kGlobal,
  kExcluded,
  kUnquantized,  // an Embedding/EmbeddingBag that no pattern or type entry names: the global config is for Linear/Conv
};

/// Module types that global_quant_config applies to (embeddings need an explicit type or pattern entry, as in Quark).
bool GlobalConfigApplies(const std::string& module_type);

struct LayerAssignment {
  std::string module;
  std::string module_type;
  ConfigSource source = ConfigSource::kGlobal;
  std::string source_key;  // the pattern, type or exclude entry that decided
  LayerQuantConfig config;  // empty when excluded
  /// "layer_quant_config[*.down_proj]", "layer_type_quant_config[Linear]", "global_quant_config", "exclude[lm_head]",
  /// "unquantized".
  std::string SourceLabel() const;
};

struct LayerPlan {
  std::vector<LayerAssignment> layers;  // in the order of the module list
  /// nullptr when the module is unknown.
  const LayerAssignment* Find(const std::string& module) const;
};

/// Resolves every module. Quark's order: a layer_quant_config entry whose pattern matches the name (fnmatch,
/// first in order), else layer_type_quant_config[type], else global_quant_config; a name matching any exclude
/// pattern stays in floating point. The KV-cache config (kv_cache_quant_config) adds its output_tensors spec
/// to the modules its patterns match.
LayerPlan BuildLayerPlan(const Config& config, const std::vector<ModuleInfo>& modules);

/// The KV-cache output spec of a module, if a kv_cache_quant_config pattern matches it.
std::optional<QuantSpec> KvCacheSpecFor(const Config& config, const std::string& module);

}  // namespace quark
