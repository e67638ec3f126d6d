// Rejects every invalid Config before any work starts, with a message naming the field path, e.g.
// "global_quant_config.weight.group_size: 100 does not divide in_features 4096 of model.layers.0.mlp.down_proj".
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/config/layer_plan.h"
#include "core/config/quant_spec.h"

namespace quark {

struct ValidationIssue {
  enum class Severity { kError, kWarning };
  Severity severity = Severity::kError;
  std::string path;     // "layer_quant_config[*.down_proj].weight.group_size"
  std::string message;  // what is wrong, with the value
  std::string ToString() const { return path + ": " + message; }
};

/// Checks the Config alone and, when `modules` is given, against that model (shapes that must divide, exclude
/// and layer patterns that match nothing). Returns every issue found, errors and warnings.
std::vector<ValidationIssue> ValidateConfig(const Config& config, const std::vector<ModuleInfo>* modules = nullptr);

/// OK, or INVALID_ARGUMENT joining every error (warnings are not errors).
absl::Status ValidationStatus(const std::vector<ValidationIssue>& issues);

}  // namespace quark
