#include "core/export/hf_quark_checker.h"

#include <cstring>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <utility>

#include "core/base/glob.h"
#include "core/base/strings.h"
#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/model_layout.h"
#include "core/config/e8m0_tiles.h"
#include "core/config/fused_group.h"
#include "core/config/json_read.h"
#include "core/config/mxfp8_tiles_as_mx.h"
#include "core/config/quark_json.h"
#include "core/export/hf_quark_block_rules.h"
#include "core/export/hf_quark_gpt_oss.h"
#include "core/export/hf_quark_layout.h"
#include "core/export/hf_quark_moe_rules.h"

namespace quark::exporter {
namespace {

using OrderedJson = nlohmann::ordered_json;

constexpr const char* kSpecFields[] = {"dtype",         "qscheme",      "is_dynamic",   "symmetric",
                                       "ch_axis",       "group_size",   "round_method", "scale_type",
                                       "scale_format",  "scale_calculation_mode", "mx_element_dtype", "observer_cls"};
constexpr const char* kLayerKeys[] = {"weight", "input_tensors", "output_tensors", "bias"};

// vLLM's `_is_nvfp4` for one tensor (formats-2026.md 1.3): [{fp4, per_group, group_size 16, is_dynamic as given},
// {fp8_e4m3, per_tensor, static}].
bool IsVllmNvfp4List(const OrderedJson& list, bool dynamic_first) {
  if (!list.is_array() || list.size() != 2) return false;
  const OrderedJson& a = list[0];
  const OrderedJson& b = list[1];
  return JsonStringIs(a, "dtype", "fp4") && JsonStringIs(a, "qscheme", "per_group") &&
         a.value("group_size", OrderedJson()) == 16 && a.value("is_dynamic", OrderedJson()) == dynamic_first &&
         JsonStringIs(b, "dtype", "fp8_e4m3") && JsonStringIs(b, "qscheme", "per_tensor") &&
         b.value("is_dynamic", OrderedJson()) == false;
}

void CheckSpec(const OrderedJson& spec, const std::string& path, std::vector<std::string>& out) {
  if (spec.is_null()) return;
  if (spec.is_array()) {  // vLLM unwraps one-element lists; two elements are NVFP4 only (checked per layer)
    if (spec.size() != 1 && spec.size() != 2) {
      out.push_back(StrCat(path, ": a list of ", spec.size(), " specs (vLLM: multi-entry only for NVFP4)"));
      return;
    }
    for (size_t i = 0; i < spec.size(); ++i) CheckSpec(spec[i], StrCat(path, "[", i, "]"), out);
    return;
  }
  if (!spec.is_object()) {
    out.push_back(StrCat(path, ": expected a tensor spec object or null, got ", spec.dump()));
    return;
  }
  for (const char* field : kSpecFields) {
    if (!spec.contains(field)) out.push_back(StrCat(path, ".", field, ": missing (vLLM and HF read every field)"));
  }
}

// Weight-only NVFP4 (a [fp4 g16, fp8 per_tensor] weight list, no input): what Quark writes for nvfp4_weight_only, a
// valid checkpoint, but vLLM's quark path (095bfa45) dispatches a two-element list only as W4A4 (formats-2026.md 9),
// so it does not load on dense linears there: a warning (VllmQuarkLoadWarnings), not a refusal.
bool IsWeightOnlyNvfp4(const OrderedJson& layer) {
  return layer.is_object() && IsVllmNvfp4List(layer.value("weight", OrderedJson()), false) &&
         layer.value("input_tensors", OrderedJson()).is_null();
}

// #30 W4A8: vLLM's `_is_fp8_w4a8` (quark.py 095bfa45): weight [fp8_e4m3 per_tensor static, int4 per_channel
// symmetric ch_axis 0 static], input fp8_e4m3 dynamic, or static per_tensor. vLLM dispatches it for FusedMoE only
// (QuarkW4A8Fp8MoEMethod, ROCm AITER): on dense linears a two-element weight list is NVFP4 or nothing (formats-2026.md
// 9), so Quark's int4_fp8 is a warning there (VllmQuarkLoadWarnings), not a refusal.
bool IsVllmW4A8(const OrderedJson& layer) {
  if (!layer.is_object()) return false;
  const OrderedJson w = layer.value("weight", OrderedJson());
  OrderedJson in = layer.value("input_tensors", OrderedJson());
  if (in.is_array() && in.size() == 1) in = in[0];
  if (!w.is_array() || w.size() != 2 || !in.is_object()) return false;
  const OrderedJson& a = w[0];
  const OrderedJson& b = w[1];
  const bool weight_ok = JsonStringIs(a, "dtype", "fp8_e4m3") && JsonStringIs(a, "qscheme", "per_tensor") &&
                         a.value("is_dynamic", OrderedJson()) != true && JsonStringIs(b, "dtype", "int4") &&
                         JsonStringIs(b, "qscheme", "per_channel") && b.value("symmetric", OrderedJson()) == true &&
                         b.value("ch_axis", OrderedJson()) == 0 && b.value("is_dynamic", OrderedJson()) != true;
  return weight_ok && JsonStringIs(in, "dtype", "fp8_e4m3") &&
         (in.value("is_dynamic", OrderedJson()) == true || JsonStringIs(in, "qscheme", "per_tensor"));
}

void CheckLayerConfig(const OrderedJson& layer, const std::string& path, bool kv_layer, std::vector<std::string>& out) {
  if (!layer.is_object()) {
    out.push_back(StrCat(path, ": expected an object with weight, input_tensors, output_tensors, bias"));
    return;
  }
  for (const char* key : kLayerKeys) {
    if (!layer.contains(key)) {
      out.push_back(StrCat(path, ".", key, ": missing (vLLM indexes it without a default)"));
      continue;
    }
    CheckSpec(layer[key], StrCat(path, ".", key), out);
  }
  if (!kv_layer && layer.contains("output_tensors") && !layer["output_tensors"].is_null()) {
    out.push_back(StrCat(path, ".output_tensors: must be null outside the KV-cache layers (vLLM refuses it)"));
  }
  if (layer.contains("bias") && !layer["bias"].is_null()) {
    out.push_back(StrCat(path, ".bias: must be null (vLLM refuses quantized biases)"));
  }
  const OrderedJson w = layer.value("weight", OrderedJson());
  const OrderedJson in = layer.value("input_tensors", OrderedJson());
  // Dispatch steps 0, 2 and 3a (#30: E8M0 tiles as MXFP8 [R, 32] or the 128x128 E8M0 key): hf_quark_block_rules.h.
  if (JsonStringIs(w, "qscheme", "per_block")) {
    if (auto problem = VllmPerBlockProblem(w, in)) out.push_back(StrCat(path, ": ", *problem));
  }
  // Dispatch step 1: a two-element list on either tensor must be NVFP4 on both (QuarkNVFP4), else NotImplementedError.
  const bool multi = (w.is_array() && w.size() > 1) || (in.is_array() && in.size() > 1);
  if (multi && !(IsVllmNvfp4List(w, false) && IsVllmNvfp4List(in, true)) && !IsWeightOnlyNvfp4(layer) &&
      !IsVllmW4A8(layer)) {
    out.push_back(StrCat(path, ": two-element spec lists load in vLLM only as NVFP4 W4A4 (_is_nvfp4: weight [fp4 ",
                         "per_group 16 static, fp8_e4m3 per_tensor static], input [fp4 per_group 16 dynamic, fp8_e4m3 ",
                         "per_tensor static]) or, for MoE experts, W4A8 (_is_fp8_w4a8: weight [fp8_e4m3 per_tensor, ",
                         "int4 per_channel symmetric ch_axis 0], input fp8_e4m3); NVFP4 weight-only loads through ",
                         "compressed-tensors (NVFP4A16)"));
  }
}

std::vector<std::string> KvGroup(const OrderedJson& qc) {
  std::vector<std::string> group;
  if (!qc.contains("export") || !qc["export"].is_object()) return group;
  const OrderedJson& g = qc["export"].value("kv_cache_group", OrderedJson::array());
  if (!g.is_array()) return group;
  for (const auto& p : g) {
    if (p.is_string()) group.push_back(p.get<std::string>());
  }
  return group;
}

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

void CheckKvGroup(const OrderedJson& qc, std::vector<std::string>& out) {
  const auto group = KvGroup(qc);
  const OrderedJson& layers = qc["layer_quant_config"];
  const OrderedJson* first = nullptr;
  for (const auto& pattern : group) {
    if (!layers.is_object() || !layers.contains(pattern)) {
      out.push_back(StrCat("export.kv_cache_group: \"", pattern, "\" has no layer_quant_config entry (vLLM refuses it)"));
      continue;
    }
    const OrderedJson& o = layers[pattern].value("output_tensors", OrderedJson());
    if (o.is_null()) {
      out.push_back(StrCat("layer_quant_config[", pattern, "].output_tensors: null for a kv_cache_group pattern"));
      continue;
    }
    if (first != nullptr && *first != o) {
      out.push_back(StrCat("layer_quant_config[", pattern, "].output_tensors: differs from the other KV-cache patterns"));
    }
    first = &layers[pattern]["output_tensors"];
  }
}

}  // namespace

std::vector<std::string> VllmQuarkLoadWarnings(const OrderedJson& qc) {
  std::vector<std::string> out;
  auto check = [&](const OrderedJson& layer, const std::string& path) {
    if (IsWeightOnlyNvfp4(layer)) {
      out.push_back(StrCat(path, ": NVFP4 weight-only loads in vLLM's quark path only for MoE experts (a two-element "
                           "weight list dispatches as W4A4 or not at all on dense linears); export compressed_tensors "
                           "for vLLM's NVFP4A16"));
    }
    if (IsVllmW4A8(layer)) {
      out.push_back(StrCat(path, ": W4A8 (int4_fp8) loads in vLLM's quark path only for MoE experts ",
                           "(QuarkW4A8Fp8MoEMethod, ROCm AITER); on dense linears a two-element weight list dispatches ",
                           "as NVFP4 or not at all"));
    }
  };
  if (!qc.is_object()) return out;
  if (qc.contains("global_quant_config")) check(qc["global_quant_config"], "global_quant_config");
  for (const char* key : {"layer_quant_config", "layer_type_quant_config"}) {
    if (!qc.contains(key) || !qc[key].is_object()) continue;
    for (const auto& [pattern, layer] : qc[key].items()) check(layer, StrCat(key, "[", pattern, "]"));
  }
  return out;
}

std::vector<std::string> QuantizationConfigProblems(const OrderedJson& qc) {
  std::vector<std::string> out;
  if (!qc.is_object()) return {"quantization_config: expected an object"};
  if (qc.value("quant_method", "") != "quark") out.push_back("quant_method: must be \"quark\"");
  for (const char* key : {"global_quant_config", "layer_quant_config", "layer_type_quant_config", "exclude", "export",
                          "algo_config", "quant_mode", "kv_cache_quant_config", "version"}) {
    if (!qc.contains(key)) out.push_back(StrCat(key, ": missing"));
  }
  if (!out.empty()) return out;
  const auto group = KvGroup(qc);
  CheckLayerConfig(qc["global_quant_config"], "global_quant_config", false, out);
  for (const char* key : {"layer_quant_config", "layer_type_quant_config"}) {
    if (!qc[key].is_object()) {
      out.push_back(StrCat(key, ": expected an object (may be {})"));
      continue;
    }
    for (const auto& [pattern, layer] : qc[key].items()) {
      const bool kv = std::string(key) == "layer_quant_config" && (Contains(group, pattern) || pattern == "*q_proj");
      CheckLayerConfig(layer, StrCat(key, "[", pattern, "]"), kv, out);
    }
  }
  if (!qc["exclude"].is_array()) {
    out.push_back("exclude: expected a list of module names");
  } else {
    for (size_t i = 0; i < qc["exclude"].size(); ++i) {
      const OrderedJson& e = qc["exclude"][i];
      if (!e.is_string()) {
        out.push_back(StrCat("exclude[", i, "]: expected a string"));
      } else if (e.get<std::string>().rfind("re:", 0) != 0 && HasGlobChars(e.get<std::string>())) {
        out.push_back(StrCat("exclude[", i, "]: \"", e.get<std::string>(),
                             "\" is a glob; vLLM matches exact names or re: regexes only"));
      }
    }
  }
  const OrderedJson& exp = qc["export"];
  if (!exp.is_object()) {
    out.push_back("export: expected an object");
    return out;
  }
  if (!exp.contains("kv_cache_group") || !exp["kv_cache_group"].is_array()) out.push_back("export.kv_cache_group: missing or not a list");
  const std::string pack = exp.value("pack_method", "");
  if (pack != "reorder" && pack != "order") out.push_back(StrCat("export.pack_method: must be reorder or order, got \"", pack, "\""));
  if (exp.value("weight_format", "") != "real_quantized") out.push_back("export.weight_format: must be \"real_quantized\"");
  if (!exp.contains("min_kv_scale") || !exp["min_kv_scale"].is_number()) out.push_back("export.min_kv_scale: missing or not a number");
  if (qc["layer_quant_config"].is_object()) CheckKvGroup(qc, out);
  return out;
}

OrderedJson VllmLayerConfig(const OrderedJson& qc, const std::string& module) {
  OrderedJson chosen;
  std::string chosen_key;
  if (qc.contains("layer_quant_config") && qc["layer_quant_config"].is_object()) {
    for (const auto& [pattern, layer] : qc["layer_quant_config"].items()) {
      const bool match = pattern.find('*') != std::string::npos ? GlobMatch(pattern, module)
                                                                  : module.find(pattern) != std::string::npos;
      if (match) {
        chosen = layer;
        chosen_key = pattern;
        break;
      }
    }
  }
  if (chosen.is_null() && qc.contains("layer_type_quant_config") && qc["layer_type_quant_config"].contains("Linear")) {
    chosen = qc["layer_type_quant_config"]["Linear"];
  }
  if (chosen.is_null() && qc.contains("global_quant_config")) chosen = qc["global_quant_config"];
  // vLLM moves the KV-cache spec off the kv_cache_group layers (and *q_proj) before resolving.
  if (!chosen_key.empty() && chosen.is_object() && (Contains(KvGroup(qc), chosen_key) || chosen_key == "*q_proj")) {
    chosen["output_tensors"] = nullptr;
  }
  return chosen;
}

bool VllmExcluded(const OrderedJson& qc, const std::string& module) {
  if (!qc.contains("exclude") || !qc["exclude"].is_array()) return false;
  for (const auto& e : qc["exclude"]) {
    if (!e.is_string()) continue;
    const std::string p = e.get<std::string>();
    if (p.rfind("re:", 0) == 0) {
      try {
        if (std::regex_search(module, std::regex(p.substr(3)), std::regex_constants::match_continuous)) return true;
      } catch (const std::regex_error&) {
        continue;
      }
    } else if (p == module) {
      return true;
    }
  }
  return false;
}

std::vector<std::string> FusedLayerProblems(const OrderedJson& qc, const checkpoint::ModelConfig& model) {
  std::vector<std::string> out;
  // Phi-3's qkv_proj and gate_up_proj are one module each in the checkpoint (vLLM's packed mapping is the identity):
  // nothing to fuse, so nothing to agree on.
  if (model.family == checkpoint::ArchFamily::kPhi3) return out;
  if (model.family == checkpoint::ArchFamily::kMoe) return MoeConfigProblems(qc, model);  // hf_quark_moe_rules.h
  if (model.family == checkpoint::ArchFamily::kDeepseek) return DeepseekConfigProblems(qc, *model.deepseek);
  if (model.family == checkpoint::ArchFamily::kLlama4) return Llama4ConfigProblems(qc, *model.llama4);
  if (model.family == checkpoint::ArchFamily::kGptOss) return GptOssConfigProblems(qc, *model.gpt_oss);
  const bool opt = model.family == checkpoint::ArchFamily::kOpt;
  const std::vector<std::vector<std::string>> fused =
      opt ? std::vector<std::vector<std::string>>{{"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"}}
          : std::vector<std::vector<std::string>>{{"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"},
                                                  {"mlp.gate_proj", "mlp.up_proj"}};
  for (int64_t i = 0; i < model.num_hidden_layers; ++i) {
    const std::string prefix = checkpoint::LayerPrefix(model, i);
    for (const auto& group : fused) {
      const std::string first = prefix + group[0];
      const OrderedJson reference = VllmLayerConfig(qc, first);
      const bool excluded = VllmExcluded(qc, first);
      for (size_t k = 1; k < group.size(); ++k) {
        const std::string name = prefix + group[k];
        if (VllmExcluded(qc, name) != excluded) {
          out.push_back(StrCat(name, ": excluded differently from ", first, " (vLLM fuses them)"));
        } else if (!excluded && VllmLayerConfig(qc, name) != reference) {
          out.push_back(StrCat(name, ": resolves to a config different from ", first,
                               " (vLLM fuses them and needs identical configs)"));
        }
      }
    }
  }
  return out;
}

namespace {

absl::StatusOr<OrderedJson> ReadJsonFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(StrCat(path, ": cannot open"));
  std::stringstream buffer;
  buffer << in.rdbuf();
  OrderedJson j = OrderedJson::parse(buffer.str(), nullptr, false);
  if (j.is_discarded()) return absl::InvalidArgumentError(StrCat(path, ": not valid JSON"));
  return j;
}

void CheckTensor(const checkpoint::CheckpointReader& reader, const ExportTensorSpec& spec, std::vector<std::string>& out) {
  auto ref = reader.Get(spec.name);
  if (!ref.ok()) {
    out.push_back(StrCat(spec.name, ": missing from the checkpoint"));
    return;
  }
  const auto& info = *ref->info;
  if (std::find(spec.dtypes.begin(), spec.dtypes.end(), info.dtype) == spec.dtypes.end()) {
    out.push_back(StrCat(spec.name, ": dtype ", checkpoint::StDTypeName(info.dtype), ", expected ",
                         checkpoint::StDTypeName(spec.dtypes[0])));
  }
  if (info.shape != spec.shape) {
    out.push_back(StrCat(spec.name, ": shape [", StrJoin(info.shape, ", "), "], expected [", StrJoin(spec.shape, ", "), "]"));
  }
}

// #30: an MX weight whose input width is not a multiple of 32 is written as Quark's exporter writes it, the last
// block padded (PerBlockMXObserver's reshape_to_blocks: ceil(in / 32) scale columns); vLLM (QuarkOCP_MX allocates
// in / 32 columns, QuarkW8A8Mxfp8 raises) and Quark's own importer (PackMethod._infer_scale_zero_point_shape: floor)
// cannot load it.
void MxPartialBlockWarnings(const OrderedJson& qc, const checkpoint::ModelConfig& model,
                            std::vector<std::string>& out) {
  for (int64_t i = 0; i < model.num_hidden_layers; ++i) {
    const std::string prefix = checkpoint::LayerPrefix(model, i);
    for (const checkpoint::LinearSpec& linear : checkpoint::LayerLinears(model, i)) {
      const int64_t in = linear.in_features;
      const std::string name = prefix + linear.relative_name;
      if (in % 32 == 0 || VllmExcluded(qc, name)) continue;
      auto config = LayerConfigFromQuarkJson(VllmLayerConfig(qc, name), name);
      if (!config.ok() || !config->weight) continue;
      // OCP MX proper, or MXFP8 as the mxfp8 preset is exported ([1, 32] E8M0 tiles, mxfp8_tiles_as_mx.h).
      const bool exported_mxfp8 = IsExportedMxfp8Layer(*config);
      if (!IsOcpMx(*config->weight) && !exported_mxfp8) continue;
      out.push_back(StrCat(name, ": in_features ", in, " is not a multiple of 32; its MX scales are written as Quark's ",
                           "exporter writes them (", (in + 31) / 32, " columns, the last block padded), which vLLM (",
                           exported_mxfp8 ? "QuarkW8A8Mxfp8" : "QuarkOCP_MX", " allocates ", in / 32,
                           ") and Quark's own importer (in_features / 32) cannot load"));
    }
  }
}

std::optional<float> ScalarF32(const checkpoint::CheckpointReader& reader, const std::string& name) {
  auto ref = reader.Get(name);
  if (!ref.ok() || ref->info->dtype != checkpoint::StDType::kF32 || ref->info->NumElements() != 1) return std::nullopt;
  float v = 0;
  std::memcpy(&v, ref->bytes().data(), sizeof(v));
  return v;
}

void CheckModuleTensors(const OrderedJson& qc, const checkpoint::ModelConfig& model, const checkpoint::CheckpointReader& reader,
                        std::vector<std::string>& out) {
  auto embed = reader.Get(checkpoint::EmbedTokensName(model) + ".weight");
  const checkpoint::StDType model_dtype = embed.ok() ? embed->info->dtype : checkpoint::StDType::kF32;
  const auto group = KvGroup(qc);
  const float min_kv = qc["export"].value("min_kv_scale", 0.0f);
  for (int64_t i = 0; i < model.num_hidden_layers; ++i) {
    const std::string prefix = checkpoint::LayerPrefix(model, i);
    std::vector<float> kv_scales;
    std::map<std::string, std::vector<std::pair<std::string, float>>> nvfp4_globals;  // fused group -> shards
    for (const checkpoint::LinearSpec& linear : checkpoint::LayerLinears(model, i)) {
      const std::string name = prefix + linear.relative_name;
      LayerQuantConfig config;
      if (!VllmExcluded(qc, name)) {
        auto parsed = LayerConfigFromQuarkJson(VllmLayerConfig(qc, name), name);
        if (!parsed.ok()) {
          out.push_back(std::string(parsed.status().message()));
          continue;
        }
        config = *parsed;
        for (const auto& pattern : group) {
          if (GlobMatch(pattern, name)) {
            auto kv = QuantSpecFromQuarkJson(qc["layer_quant_config"][pattern]["output_tensors"], pattern);
            if (kv.ok()) config.output_tensors = *kv;
            break;
          }
        }
      }
      // Per-group int4/uint4 scales may be F16 or BF16 (both listed by the layout); F32 is refused, as the spec says.
      auto specs = QuantizedLinearTensors(name, config, linear.out_features, linear.in_features, linear.has_bias,
                                          model_dtype, checkpoint::StDType::kF16);
      if (!specs.ok()) {
        out.push_back(std::string(specs.status().message()));
        continue;
      }
      for (const auto& spec : *specs) CheckTensor(reader, spec, out);
      if (config.weight && config.weight->IsNvfp4()) {
        // The engine's own grouping of shared global scales (q/k/v, gate/up, MLA's q_a/kv_a, an expert's w1/w3).
        if (auto g = ScalarF32(reader, name + ".weight_scale_2")) nvfp4_globals[Nvfp4GlobalScaleKey(name)].push_back({name, *g});
      }
      if (config.output_tensors) {
        if (auto v = ScalarF32(reader, name + ".output_scale")) kv_scales.push_back(*v);
      }
    }
    // vLLM takes the max of the shards' weight_scale_2 ("should be recomputed"): they must be one shared scale.
    for (const auto& [group, shards] : nvfp4_globals) {
      for (const auto& [name, g] : shards) {
        if (g != shards.front().second) {
          out.push_back(StrCat(name, ".weight_scale_2: ", g, " differs from ", shards.front().first, "'s ",
                               shards.front().second, " (NVFP4 fused shards share one global scale)"));
        }
      }
    }
    for (float s : kv_scales) {
      if (s != kv_scales.front()) out.push_back(StrCat(prefix, ": KV-cache output scales differ (must be max(k, v))"));
      if (s < min_kv) out.push_back(StrCat(prefix, ": KV-cache scale ", s, " below min_kv_scale ", min_kv));
    }
  }
}

}  // namespace

absl::Status CheckHfQuarkExport(const std::string& dir) {
  auto config_json = ReadJsonFile(dir + "/config.json");
  if (!config_json.ok()) return config_json.status();
  if (!config_json->contains("quantization_config")) {
    return absl::FailedPreconditionError(StrCat(dir, "/config.json: no quantization_config"));
  }
  const OrderedJson& qc = (*config_json)["quantization_config"];
  std::vector<std::string> problems = QuantizationConfigProblems(qc);
  if (problems.empty()) {
    auto model = checkpoint::ParseModelConfig(config_json->dump(), dir + "/config.json");
    if (!model.ok()) return model.status();
    for (auto& p : FusedLayerProblems(qc, *model)) problems.push_back(std::move(p));
    auto reader = checkpoint::CheckpointReader::Open(dir);
    if (!reader.ok()) {
      problems.push_back(std::string(reader.status().message()));
    } else {
      CheckModuleTensors(qc, *model, **reader, problems);
      for (auto& p : MoeRouterProblems(*model, **reader)) problems.push_back(std::move(p));
    }
  }
  if (problems.empty()) return absl::OkStatus();
  const size_t shown = std::min<size_t>(problems.size(), 20);
  std::vector<std::string> head(problems.begin(), problems.begin() + shown);
  return absl::FailedPreconditionError(StrCat("HF-quark export ", dir, " breaks ", problems.size(),
                                              " consumer rule(s): ", StrJoin(head, "; ")));
}

std::vector<std::string> VllmQuarkLoadWarnings(const OrderedJson& qc, const checkpoint::ModelConfig& model) {
  std::vector<std::string> out = VllmQuarkLoadWarnings(qc);
  for (std::string& warning : GptOssVllmLoadWarnings(qc, model)) out.push_back(std::move(warning));
  MxPartialBlockWarnings(qc, model, out);  // #30
  return out;
}

}  // namespace quark::exporter
