#include "core/export/ct_read_config.h"

#include <regex>
#include <set>

#include "core/base/strings.h"
#include "core/config/json_read.h"
#include "core/config/presets.h"
#include "core/export/ct_checker.h"
#include "core/export/ct_families.h"

namespace quark::exporter {
namespace {

using Json = nlohmann::json;

absl::Status Invalid(const std::string& path, const std::string& why) {
  return absl::InvalidArgumentError(StrCat(path, ": ", why));
}

// scale_dtype / zp_dtype: the torch dtype names the library serialises.
absl::Status CheckDtypeName(const Json& a, const char* key, const std::string& path) {
  static const std::set<std::string> kNames = {"torch.float8_e4m3fn", "torch.uint8",    "torch.int8",
                                               "torch.float16",       "torch.bfloat16", "torch.float32"};
  if (!a.contains(key) || a[key].is_null()) return absl::OkStatus();
  if (!a[key].is_string() || !kNames.count(a[key].get<std::string>())) {
    return Invalid(StrCat(path, ".", key), StrCat(a[key].dump(), " is not a dtype the library writes"));
  }
  return absl::OkStatus();
}

// Fields the checker's enums leave open: actorder, observer, observer_kwargs, the dtypes, block_structure's shape.
absl::Status CheckOpenFields(const Json& a, const std::string& path) {
  if (a.contains("actorder") && !a["actorder"].is_null()) {
    const std::string order = a["actorder"].is_string() ? a["actorder"].get<std::string>() : "";
    if (order == "group" || order == "dynamic") {
      return absl::UnimplementedError(StrCat(path, ".actorder: \"", order,
                                             "\" stores a g_idx permutation, which this "
                                             "reader does not apply (\"weight\" / \"static\" / null are read)"));
    }
    if (order != "weight" && order != "static") return Invalid(path + ".actorder", a["actorder"].dump() + " unknown");
  }
  if (a.contains("observer") && !a["observer"].is_null() && !a["observer"].is_string()) {
    return Invalid(path + ".observer", "not a string");
  }
  if (a.contains("observer_kwargs") && !a["observer_kwargs"].is_null() && !a["observer_kwargs"].is_object()) {
    return Invalid(path + ".observer_kwargs", "not an object");
  }
  for (const char* key : {"scale_dtype", "zp_dtype"}) {
    if (auto s = CheckDtypeName(a, key, path); !s.ok()) return s;
  }
  if (!a.contains("symmetric") || a["symmetric"].is_boolean()) return absl::OkStatus();
  return Invalid(path + ".symmetric", "not a boolean");
}

// NVFP4 and MX specs exactly as the presets spell them (so that a read-back runs the fake-quantized model's numerics).
QuantSpec PresetSpec(const char* preset, bool dynamic) {
  QuantSpec s = *PresetConfig(preset)->global_quant_config.weight;
  s.is_dynamic = dynamic;
  return s;
}

absl::StatusOr<DType> ElementOf(const Json& a, const std::string& path) {
  const int64_t bits = a.value("num_bits", 8);
  if (JsonString(a, "type") == "int") {
    switch (bits) {
      case 8:
        return DType::kInt8;
      case 4:
        return DType::kInt4;
      case 3:
        return DType::kInt3;
      case 2:
        return DType::kInt2;
    }
    return Invalid(path + ".num_bits", StrCat(bits, "-bit int (the engine's integer grids: 2, 3, 4, 8 bits)"));
  }
  if (bits == 8) return DType::kFp8E4M3;
  if (bits == 4) return DType::kFp4;
  return Invalid(path + ".num_bits", StrCat(bits, "-bit float (compressed-tensors' floats: 8 = e4m3, 4 = e2m1)"));
}

// tensor / channel / group / block / token for a non-MX, non-NVFP4 spec `s` (dtype set).
absl::Status SetGranularity(const Json& a, bool is_weight, const std::string& path, QuantSpec& s) {
  const std::string strategy = JsonString(a, "strategy");
  if (strategy == "tensor") {
    s.qscheme = QScheme::kPerTensor;
  } else if (strategy == "channel" && is_weight) {
    s.qscheme = QScheme::kPerChannel;
    s.ch_axis = 0;
  } else if (strategy == "group") {
    s.qscheme = QScheme::kPerGroup;
    s.ch_axis = is_weight ? 1 : -1;
    s.group_size = a["group_size"].get<int>();
    if (!is_weight && !s.is_dynamic) return Invalid(path + ".dynamic", "false with groups on an activation");
  } else if (strategy == "block" && is_weight) {
    const Json& b = a["block_structure"];
    if (!b.is_array() || b.size() != 2 || !b[0].is_number_integer() || !b[1].is_number_integer() ||
        b[0].get<int>() <= 0 || b[1].get<int>() <= 0) {
      return Invalid(path + ".block_structure", StrCat(b.dump(), " is not [rows, cols]"));
    }
    s.qscheme = QScheme::kPerBlock;
    s.block_size = {b[0].get<int>(), b[1].get<int>()};
    s.scale_type = ScaleType::kFloat32;  // as the fp8_block preset's weight
  } else if (strategy == "token" && !is_weight) {
    s.qscheme = QScheme::kPerChannel;
    s.ch_axis = 1;
  } else {
    return Invalid(path + ".strategy", StrCat("\"", strategy, "\" on ", is_weight ? "a weight" : "an activation",
                                              " (the engine has no such scheme)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<QuantSpec> QuantSpecFromCtArgs(const Json& a, bool is_weight, const std::string& format,
                                              const std::string& path) {
  if (!a.is_object()) return Invalid(path, "not a QuantizationArgs object");
  if (auto problems = CtArgsProblems(a, path, !is_weight); !problems.empty()) {
    return absl::InvalidArgumentError(StrJoin(problems, "; "));
  }
  if (auto s = CheckOpenFields(a, path); !s.ok()) return s;
  auto element = ElementOf(a, path);
  if (!element.ok()) return element.status();
  const bool dynamic = a.contains("dynamic") && a["dynamic"] != false;
  if (is_weight && dynamic) return Invalid(path + ".dynamic", "a weight is stored quantized, not dynamic");
  const bool symmetric = a.value("symmetric", true);
  const bool is_float = JsonString(a, "type") == "float";
  if (is_float && !symmetric) return Invalid(path + ".symmetric", "false with a float type");
  const std::string strategy = JsonString(a, "strategy");
  const int64_t group =
      a.contains("group_size") && a["group_size"].is_number_integer() ? a["group_size"].get<int64_t>() : 0;
  if (strategy == "tensor_group") {
    if (*element != DType::kFp4 || group != 16) {
      return Invalid(path + ".strategy", "tensor_group is NVFP4 only (float, num_bits 4, group_size 16)");
    }
    return PresetSpec("nvfp4_weight_only", dynamic);
  }
  const bool mx = JsonString(a, "scale_dtype") == "torch.uint8" || (is_weight && IsCtMxFormat(format));
  if (mx) {
    if (!is_float || strategy != "group" || group != 32) {
      return Invalid(path + ".group_size", "MX (E8M0 uint8 scales) is float groups of 32");
    }
    QuantSpec s = PresetSpec("mxfp4_weight_only", dynamic);
    s.dtype = *element;
    return s;
  }
  if (*element == DType::kFp4) {
    return Invalid(path + ".num_bits", "4-bit float outside NVFP4 (tensor_group 16) and MX (groups of 32)");
  }
  QuantSpec s;
  s.dtype = *element;
  s.symmetric = symmetric;
  s.is_dynamic = dynamic;
  if (auto st = SetGranularity(a, is_weight, path, s); !st.ok()) return st;
  return s;
}

namespace {

// A target or ignore entry: "Linear" (any linear), "re:<regex>" (Python's re.match: anchored at the start), else an
// exact module name.
struct Matcher {
  std::string text;
  std::optional<std::regex> regex;
  bool Matches(const std::string& module) const {
    if (text == "Linear") return true;
    if (regex) return std::regex_search(module, *regex, std::regex_constants::match_continuous);
    return text == module;
  }
};

absl::StatusOr<std::vector<Matcher>> Matchers(const Json& list, const std::string& path) {
  if (!list.is_array()) return Invalid(path, "not a list of strings");
  std::vector<Matcher> out;
  for (size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_string()) return Invalid(StrCat(path, "[", i, "]"), "not a string");
    Matcher m{list[i].get<std::string>(), std::nullopt};
    if (m.text.rfind("re:", 0) == 0) {
      try {
        m.regex.emplace(m.text.substr(3));
      } catch (const std::regex_error& e) {
        return Invalid(StrCat(path, "[", i, "]"), StrCat("\"", m.text, "\" is not a regex (", e.what(), ")"));
      }
    }
    out.push_back(std::move(m));
  }
  return out;
}

absl::Status CheckTopLevel(const Json& qc) {
  static const std::set<std::string> kKeys = {"config_groups",
                                              "quant_method",
                                              "kv_cache_scheme",
                                              "format",
                                              "quantization_status",
                                              "global_compression_ratio",
                                              "ignore",
                                              "version",
                                              "sparsity_config",
                                              "transform_config",
                                              "run_compressed"};
  if (!qc.is_object()) return Invalid("quantization_config", "not an object");
  for (const auto& [key, value] : qc.items()) {
    if (!kKeys.count(key)) return Invalid(key, "not a compressed-tensors QuantizationConfig field");
  }
  // transform_config (#35 item 4) is read by CtWeightSource (ct_transform.h: online input Hadamards).
  for (const char* key : {"sparsity_config"}) {
    if (qc.contains(key) && !qc[key].is_null() && !(qc[key].is_object() && qc[key].empty())) {
      return absl::UnimplementedError(StrCat(key, ": ", qc[key].dump(), " (this reader reads quantization only)"));
    }
  }
  const std::string status = JsonString(qc, "quantization_status");
  if (status != "compressed") {
    const bool known = status == "initialized" || status == "calibration" || status == "frozen";
    return Invalid("quantization_status",
                   StrCat(qc.contains("quantization_status") ? qc["quantization_status"].dump() : "missing",
                          known ? " (the weights are not stored compressed; only compressed exports are read)"
                                : " is not a QuantizationStatus"));
  }
  std::vector<std::string> problems = CtQuantizationConfigProblems(qc);
  if (!problems.empty()) return absl::InvalidArgumentError(StrJoin(problems, "; "));
  return absl::OkStatus();
}

struct Group {
  std::string name;
  std::vector<Matcher> targets;
  std::vector<bool> target_used;
  LayerQuantConfig config;
};

absl::StatusOr<Group> ReadGroup(const std::string& name, const Json& g, const std::string& global_format) {
  const std::string path = "config_groups." + name;
  if (!g.is_object()) return Invalid(path, "a preset name with targets (give the QuantizationScheme itself)");
  Group group{name, {}, {}, {}};
  auto targets = Matchers(g["targets"], path + ".targets");
  if (!targets.ok()) return targets.status();
  group.targets = *std::move(targets);
  group.target_used.assign(group.targets.size(), false);
  const std::string format =
      g.contains("format") && g["format"].is_string() ? g["format"].get<std::string>() : global_format;
  if (FindCtFamily(format) == nullptr) {
    return absl::UnimplementedError(StrCat(path, ".format: \"", format, "\" is not read (the engine reads ",
                                           "pack-quantized, int-quantized, float-quantized, nvfp4-pack-quantized, ",
                                           "mxfp4-pack-quantized, mxfp8-quantized)"));
  }
  if (!g.contains("weights") || g["weights"].is_null()) return Invalid(path + ".weights", "missing (activation-only)");
  if (g.contains("output_activations") && !g["output_activations"].is_null()) {
    return absl::UnimplementedError(StrCat(path, ".output_activations: output quantization outside kv_cache_scheme"));
  }
  auto weight = QuantSpecFromCtArgs(g["weights"], true, format, path + ".weights");
  if (!weight.ok()) return weight.status();
  group.config.weight = *weight;
  if (g.contains("input_activations") && !g["input_activations"].is_null()) {
    auto input = QuantSpecFromCtArgs(g["input_activations"], false, format, path + ".input_activations");
    if (!input.ok()) return input.status();
    group.config.input_tensors = *input;
  }
  return group;
}

absl::Status ReadKvCache(const Json& qc, Config& config) {
  if (!qc.contains("kv_cache_scheme") || qc["kv_cache_scheme"].is_null()) return absl::OkStatus();
  auto kv = QuantSpecFromCtArgs(qc["kv_cache_scheme"], false, "", "kv_cache_scheme");
  if (!kv.ok()) return kv.status();
  if (kv->qscheme != QScheme::kPerTensor || kv->is_dynamic || !kv->symmetric ||
      (kv->dtype != DType::kFp8E4M3 && kv->dtype != DType::kInt8)) {
    return Invalid("kv_cache_scheme", "the KV cache is read as static symmetric per-tensor fp8 or int8 only");
  }
  for (const char* pattern : {"*k_proj", "*v_proj"}) {  // as ApplyKvCacheDtype: k_proj / v_proj outputs
    LayerQuantConfig c;
    c.output_tensors = *kv;
    config.kv_cache_quant_config.push_back({pattern, c});
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Config> ConfigFromCompressedTensors(const Json& qc, const std::vector<ModuleInfo>& modules) {
  if (auto s = CheckTopLevel(qc); !s.ok()) return s;
  std::vector<Group> groups;
  for (const auto& [name, g] : qc["config_groups"].items()) {  // key order, as CtGroupFor
    auto group = ReadGroup(name, g, JsonString(qc, "format"));
    if (!group.ok()) return group.status();
    groups.push_back(*std::move(group));
  }
  auto ignore = Matchers(qc.contains("ignore") && !qc["ignore"].is_null() ? qc["ignore"] : Json::array(), "ignore");
  if (!ignore.ok()) return ignore.status();
  Config config;
  for (const ModuleInfo& m : modules) {
    if (m.type != "Linear") continue;
    if (std::any_of(ignore->begin(), ignore->end(), [&](const Matcher& i) { return i.Matches(m.name); })) {
      config.exclude.push_back(m.name);
      continue;
    }
    // As vLLM's find_matched_target (and CtGroupFor): a name or "re:" target of any group first, then "Linear".
    Group* hit = nullptr;
    for (const bool by_class : {false, true}) {
      for (Group& g : groups) {
        for (size_t i = 0; i < g.targets.size() && hit == nullptr; ++i) {
          const bool linear = g.targets[i].text == "Linear";
          if (linear == by_class && g.targets[i].Matches(m.name)) hit = &g;
        }
        if (hit != nullptr) break;
      }
      if (hit != nullptr) break;
    }
    if (hit == nullptr) continue;
    for (size_t i = 0; i < hit->targets.size(); ++i) {
      if (hit->targets[i].Matches(m.name)) hit->target_used[i] = true;
    }
    config.layer_quant_config.push_back({m.name, hit->config});
  }
  for (const Group& g : groups) {
    for (size_t i = 0; i < g.targets.size(); ++i) {
      if (!g.target_used[i] && g.targets[i].text != "Linear") {
        return Invalid(StrCat("config_groups.", g.name, ".targets[", i, "]"),
                       StrCat("\"", g.targets[i].text,
                              "\" matches no linear of the model that another group or "
                              "`ignore` does not take first (targets read: Linear, module names, re: regexes)"));
      }
    }
  }
  if (auto s = ReadKvCache(qc, config); !s.ok()) return s;
  return config;
}

}  // namespace quark::exporter
