#include "core/config/layer_plan.h"

#include "core/base/glob.h"

namespace quark {
namespace {

const PatternQuantConfig* FirstMatch(const std::vector<PatternQuantConfig>& entries, const std::string& name) {
  for (const auto& entry : entries) {
    if (GlobMatch(entry.pattern, name)) return &entry;
  }
  return nullptr;
}

const std::string* MatchingExclude(const std::vector<std::string>& exclude, const std::string& name) {
  for (const auto& pattern : exclude) {
    if (GlobMatch(pattern, name)) return &pattern;
  }
  return nullptr;
}

}  // namespace

bool GlobalConfigApplies(const std::string& module_type) {
  return module_type == "Linear" || module_type == "Conv2d" || module_type == "ConvTranspose2d";
}

std::string LayerAssignment::SourceLabel() const {
  switch (source) {
    case ConfigSource::kLayerPattern: return "layer_quant_config[" + source_key + "]";
    case ConfigSource::kLayerType: return "layer_type_quant_config[" + source_key + "]";
    case ConfigSource::kGlobal: return "global_quant_config";
    case ConfigSource::kExcluded: return "exclude[" + source_key + "]";
    case ConfigSource::kUnquantized: return "unquantized";
  }
  return "?";
}

const LayerAssignment* LayerPlan::Find(const std::string& module) const {
  for (const auto& layer : layers) {
    if (layer.module == module) return &layer;
  }
  return nullptr;
}

std::optional<QuantSpec> KvCacheSpecFor(const Config& config, const std::string& module) {
  const PatternQuantConfig* kv = FirstMatch(config.kv_cache_quant_config, module);
  if (kv == nullptr || !kv->config.output_tensors) return std::nullopt;
  return kv->config.output_tensors;
}

LayerPlan BuildLayerPlan(const Config& config, const std::vector<ModuleInfo>& modules) {
  LayerPlan plan;
  plan.layers.reserve(modules.size());
  for (const auto& module : modules) {
    LayerAssignment assignment;
    assignment.module = module.name;
    assignment.module_type = module.type;
    if (const std::string* excluded = MatchingExclude(config.exclude, module.name)) {
      assignment.source = ConfigSource::kExcluded;
      assignment.source_key = *excluded;
      plan.layers.push_back(std::move(assignment));
      continue;
    }
    if (const PatternQuantConfig* match = FirstMatch(config.layer_quant_config, module.name)) {
      assignment.source = ConfigSource::kLayerPattern;
      assignment.source_key = match->pattern;
      assignment.config = match->config;
    } else if (auto it = config.layer_type_quant_config.find(module.type); it != config.layer_type_quant_config.end()) {
      assignment.source = ConfigSource::kLayerType;
      assignment.source_key = module.type;
      assignment.config = it->second;
    } else if (GlobalConfigApplies(module.type)) {
      assignment.source = ConfigSource::kGlobal;
      assignment.config = config.global_quant_config;
    } else {
      assignment.source = ConfigSource::kUnquantized;
    }
    // KV-cache quantization rides on the k_proj / v_proj outputs, whatever decided the rest of the layer.
    if (auto kv = KvCacheSpecFor(config, module.name)) assignment.config.output_tensors = kv;
    plan.layers.push_back(std::move(assignment));
  }
  return plan;
}

}  // namespace quark
