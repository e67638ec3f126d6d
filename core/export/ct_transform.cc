#include "core/export/ct_transform.h"

#include <set>

#include "core/base/strings.h"
#include "core/export/ct_targets.h"

namespace quark::exporter {
namespace {

using Json = nlohmann::json;

absl::Status Invalid(const std::string& path, const std::string& why) {
  return absl::InvalidArgumentError(StrCat("transform_config.", path, ": ", why));
}

absl::StatusOr<std::vector<std::string>> Names(const Json& args, const char* key, const std::string& path) {
  std::vector<std::string> out;
  if (!args.contains(key)) return out;
  const Json& v = args[key];
  if (v.is_string()) return std::vector<std::string>{v.get<std::string>()};  // TransformArgs.wrap_singleton
  if (!v.is_array()) return Invalid(StrCat(path, ".", key), "not a list of names");
  for (const Json& name : v) {
    if (!name.is_string()) return Invalid(StrCat(path, ".", key), "not a list of names");
    out.push_back(name.get<std::string>());
  }
  return out;
}

bool Matches(const std::vector<std::string>& names, const std::string& module) {
  for (const std::string& name : names) {
    if (name == "Linear" || CtNameMatches(name, module)) return true;
  }
  return false;
}

}  // namespace

Json CtR4TransformConfig() {
  const Json targets = Json::array({"re:.*mlp.down_proj$"});
  Json scheme;
  scheme["type"] = "random-hadamard";
  scheme["apply"] = Json::array({Json{{"targets", targets}, {"location", "input"}, {"inverse", false},
                                      {"ignore", Json::array()}},
                                 Json{{"targets", targets}, {"location", "weight_input"}, {"inverse", true},
                                      {"ignore", Json::array()}}});
  scheme["randomize"] = false;
  scheme["requires_grad"] = false;
  scheme["head_dim"] = nullptr;
  scheme["precision"] = "torch.float32";
  Json config;
  config["config_groups"][kCtR4Scheme] = scheme;
  return config;
}

std::string CtTransformWeightName(const std::string& module, const std::string& scheme, const std::string& location) {
  return StrCat(module, ".", scheme, "_", location, ".weight");
}

absl::StatusOr<std::vector<CtInputTransform>> CtInputTransforms(const Json& transform_config) {
  std::vector<CtInputTransform> out;
  if (transform_config.is_null() || (transform_config.is_object() && transform_config.empty())) return out;
  if (!transform_config.is_object()) return Invalid("", "not a TransformConfig object");
  for (const auto& [key, v] : transform_config.items()) {
    if (key != "config_groups") return Invalid(key, "not a TransformConfig field (extra=forbid)");
  }
  if (!transform_config.contains("config_groups") || !transform_config["config_groups"].is_object()) {
    return Invalid("config_groups", "missing or not an object");
  }
  static const std::set<std::string> kSchemeKeys = {"type", "apply", "randomize", "requires_grad", "head_dim",
                                                     "precision"};
  static const std::set<std::string> kArgsKeys = {"targets", "location", "inverse", "ignore"};
  for (const auto& [name, scheme] : transform_config["config_groups"].items()) {
    const std::string path = StrCat("config_groups.", name);
    if (!scheme.is_object()) return Invalid(path, "not a TransformScheme object");
    for (const auto& [key, v] : scheme.items()) {
      if (!kSchemeKeys.count(key)) return Invalid(StrCat(path, ".", key), "not a TransformScheme field (extra=forbid)");
    }
    const std::string type = scheme.value("type", "");
    if (type != "hadamard" && type != "random-hadamard") {
      return absl::UnimplementedError(StrCat("transform_config.", path, ".type: \"", type, "\" (only Hadamard "
                                             "transforms, hadamard and random-hadamard, are applied here)"));
    }
    if (scheme.value("randomize", false)) {
      return absl::UnimplementedError(StrCat("transform_config.", path, ".randomize: true (the permutation is not "
                                             "read here)"));
    }
    if (scheme.contains("head_dim") && !scheme["head_dim"].is_null()) {
      return absl::UnimplementedError(StrCat("transform_config.", path, ".head_dim: ", scheme["head_dim"].dump(),
                                             " (block-diagonal transforms are not applied here)"));
    }
    if (!scheme.contains("apply") || !scheme["apply"].is_array()) return Invalid(StrCat(path, ".apply"), "not a list");
    for (size_t i = 0; i < scheme["apply"].size(); ++i) {
      const Json& args = scheme["apply"][i];
      const std::string args_path = StrCat(path, ".apply[", i, "]");
      if (!args.is_object()) return Invalid(args_path, "not a TransformArgs object");
      for (const auto& [key, v] : args.items()) {
        if (!kArgsKeys.count(key)) return Invalid(StrCat(args_path, ".", key), "not a TransformArgs field (extra=forbid)");
      }
      const std::string location = args.value("location", "");
      if (location == "weight_input" || location == "weight_output") continue;  // fused into the stored weight
      if (location == "q_attn" || location == "k_cache") {
        return absl::UnimplementedError(StrCat("transform_config.", args_path, ".location: ", location, " (an "
                                               "attention transform, R3: vLLM's compressed_tensors path does not "
                                               "implement it yet)"));
      }
      if (location != "input") {
        return absl::UnimplementedError(StrCat("transform_config.", args_path, ".location: \"", location,
                                               "\" (only online input transforms are applied here)"));
      }
      if (args.value("inverse", false)) {
        return absl::UnimplementedError(StrCat("transform_config.", args_path, ".inverse: true on an online input"));
      }
      CtInputTransform t;
      t.scheme = name;
      t.type = type;
      auto targets = Names(args, "targets", args_path);
      if (!targets.ok()) return targets.status();
      auto ignore = Names(args, "ignore", args_path);
      if (!ignore.ok()) return ignore.status();
      t.targets = *std::move(targets);
      t.ignore = *std::move(ignore);
      out.push_back(std::move(t));
    }
  }
  return out;
}

const CtInputTransform* CtInputTransformFor(const std::vector<CtInputTransform>& transforms,
                                            const std::string& module) {
  for (const CtInputTransform& t : transforms) {
    if (Matches(t.targets, module) && !Matches(t.ignore, module)) return &t;
  }
  return nullptr;
}

}  // namespace quark::exporter
