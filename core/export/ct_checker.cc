#include "core/export/ct_checker.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "core/base/strings.h"
#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/model_config.h"
#include "core/checkpoint/model_layout.h"
#include "core/config/fused_group.h"
#include "core/config/json_read.h"
#include "core/export/ct_moe_rules.h"
#include "core/export/ct_targets.h"
#include "core/export/ct_transform.h"
#include "core/export/hf_quark_moe_rules.h"

namespace quark::exporter {
namespace {

using Json = nlohmann::json;
using checkpoint::StDType;

const std::set<std::string> kArgsKeys = {"num_bits",        "type",           "symmetric", "group_size",  "strategy",
                                         "block_structure", "dynamic",        "actorder",  "scale_dtype", "zp_dtype",
                                         "observer",        "observer_kwargs"};
const std::set<std::string> kSchemeKeys = {"targets", "weights", "input_activations", "output_activations", "format"};
const std::set<std::string> kStrategies = {"tensor", "channel", "group", "block", "token", "tensor_group", "attn_head"};
const std::set<std::string> kFormats = {
    "pack-quantized",       "int-quantized",        "float-quantized", "naive-quantized",
    "nvfp4-pack-quantized", "mxfp4-pack-quantized", "mxfp8-quantized", "dense"};

bool Dynamic(const Json& a) { return a.contains("dynamic") && a["dynamic"] != false; }

void ArgsProblems(const Json& a, const std::string& path, bool activation, std::vector<std::string>& out) {
  if (!a.is_object()) return out.push_back(StrCat(path, ": not an object"));
  for (const auto& [key, value] : a.items()) {
    if (!kArgsKeys.count(key)) out.push_back(StrCat(path, ".", key, ": not a QuantizationArgs field (extra=forbid)"));
  }
  const std::string type = JsonString(a, "type"), strategy = JsonString(a, "strategy");
  if (type != "int" && type != "float") out.push_back(StrCat(path, ".type: \"", type, "\" is not int or float"));
  if (!kStrategies.count(strategy)) out.push_back(StrCat(path, ".strategy: \"", strategy, "\" is not a strategy"));
  const int64_t bits = JsonInt(a, "num_bits");
  if (bits < 1 || bits > 8) out.push_back(StrCat(path, ".num_bits: ", bits, " outside 1..8"));
  const int64_t group = JsonInt(a, "group_size", 0);
  if ((strategy == "group" || strategy == "tensor_group") && group <= 0) {
    out.push_back(StrCat(path, ".group_size: ", strategy, " needs group_size > 0"));
  }
  if (strategy == "channel" && group > 0) out.push_back(StrCat(path, ".group_size: ", group, " with strategy channel"));
  const bool has_block = a.contains("block_structure") && !a["block_structure"].is_null();
  if ((strategy == "block") != has_block) out.push_back(StrCat(path, ".block_structure: set iff strategy is block"));
  if (strategy == "token" && !Dynamic(a)) out.push_back(StrCat(path, ".strategy: token needs dynamic"));
  if (Dynamic(a) && strategy != "token" && strategy != "tensor" && strategy != "tensor_group" && strategy != "group") {
    out.push_back(StrCat(path, ".dynamic: not allowed with strategy ", strategy));
  }
  if (a.contains("dynamic") && a["dynamic"].is_string() && (a["dynamic"] != "local" || strategy != "tensor_group")) {
    out.push_back(StrCat(path, ".dynamic: \"local\" only with tensor_group"));
  }
  if (activation && a.contains("actorder") && !a["actorder"].is_null()) {
    out.push_back(StrCat(path, ".actorder: not allowed on activations"));
  }
}

// Expected tensors of `m` [out, in] under group `g` (formats-2026.md 2.3), from the JSON alone.
struct Expected {
  std::string name;
  std::vector<StDType> dtypes;
  std::vector<int64_t> shape;
};

std::vector<int64_t> ScaleShape(const Json& w, int64_t out, int64_t in) {
  const std::string s = JsonString(w, "strategy");
  if (s == "channel") return {out, 1};
  if (s == "group" || s == "tensor_group") return {out, in / std::max<int64_t>(1, JsonInt(w, "group_size", 1))};
  if (s == "block") return {out / w["block_structure"][0].get<int64_t>(), in / w["block_structure"][1].get<int64_t>()};
  return {1};
}

std::vector<Expected> ExpectedTensors(const std::string& m, const Json& g, const std::string& format, int64_t out,
                                      int64_t in, std::vector<std::string>& problems) {
  const std::vector<StDType> kFloat = {StDType::kF32, StDType::kF16, StDType::kBF16};
  const Json& w = g["weights"];
  const int64_t bits = JsonInt(w, "num_bits");
  const std::vector<int64_t> scale = ScaleShape(w, out, in);
  std::vector<Expected> t;
  if (format == "pack-quantized") {
    t.push_back({m + ".weight_packed", {StDType::kI32}, {out, (in * bits + 31) / 32}});
    t.push_back({m + ".weight_scale", kFloat, scale});
    t.push_back({m + ".weight_shape", {StDType::kI64}, {2}});
    if (!w.value("symmetric", true)) {
      const bool packed = JsonString(w, "strategy") == "group" || JsonString(w, "strategy") == "channel";
      t.push_back({m + ".weight_zero_point",
                   {packed ? StDType::kI32 : StDType::kI8},
                   packed ? std::vector<int64_t>{(out * bits + 31) / 32, scale.back()} : scale});
    }
  } else if (format == "int-quantized" || format == "float-quantized") {
    t.push_back({m + ".weight", {format == "int-quantized" ? StDType::kI8 : StDType::kF8E4M3}, {out, in}});
    t.push_back({m + ".weight_scale", kFloat, scale});
    if (!w.value("symmetric", true)) t.push_back({m + ".weight_zero_point", {StDType::kI8}, scale});
  } else if (format == "nvfp4-pack-quantized") {
    t.push_back({m + ".weight_packed", {StDType::kU8}, {out, in / 2}});
    t.push_back({m + ".weight_scale", {StDType::kF8E4M3}, {out, in / 16}});
    t.push_back({m + ".weight_global_scale", {StDType::kF32}, {1}});
  } else if (IsCtMxFormat(format)) {  // #30 item 4: E8M0 bytes per group of 32
    if (format == "mxfp4-pack-quantized") {
      t.push_back({m + ".weight_packed", {StDType::kU8}, {out, in / 2}});
    } else {
      t.push_back({m + ".weight", {StDType::kF8E4M3}, {out, in}});
    }
    t.push_back({m + ".weight_scale", {StDType::kU8}, {out, in / 32}});
  } else {
    problems.push_back(StrCat(m, ": format ", format, " is not checked"));
  }
  const Json& a = g.contains("input_activations") ? g["input_activations"] : Json();
  if (a.is_object()) {
    if (JsonString(a, "strategy") == "tensor_group") {
      t.push_back({m + ".input_global_scale", {StDType::kF32}, {1}});
    } else if (!Dynamic(a)) {
      t.push_back({m + ".input_scale", {StDType::kF32}, {1}});
      if (!a.value("symmetric", true)) t.push_back({m + ".input_zero_point", {StDType::kI8}, {1}});
    }
  }
  return t;
}

std::optional<float> ScalarF32(const checkpoint::CheckpointReader& reader, const std::string& name) {
  auto ref = reader.Get(name);
  if (!ref.ok() || ref->info->dtype != StDType::kF32 || ref->info->NumElements() != 1) return std::nullopt;
  float v = 0;
  std::memcpy(&v, ref->bytes().data(), sizeof(v));
  return v;
}

void CheckTensors(const std::vector<Expected>& expected, const checkpoint::CheckpointReader& reader,
                  std::vector<std::string>& out) {
  for (const Expected& e : expected) {
    auto ref = reader.Get(e.name);
    if (!ref.ok()) {
      out.push_back(StrCat(e.name, ": missing"));
      continue;
    }
    if (std::find(e.dtypes.begin(), e.dtypes.end(), ref->info->dtype) == e.dtypes.end()) {
      out.push_back(StrCat(e.name, ": dtype ", checkpoint::StDTypeName(ref->info->dtype), ", expected ",
                           checkpoint::StDTypeName(e.dtypes[0])));
    }
    if (ref->info->shape != e.shape) {
      out.push_back(
          StrCat(e.name, ": shape [", StrJoin(ref->info->shape, ", "), "], expected [", StrJoin(e.shape, ", "), "]"));
    }
  }
}

// #35 item 4: transform_config as vLLM's CompressedTensorsLinearTransformMethod loads it: each online input transform
// needs `<module>.<scheme>_input.weight` [in_features, in_features] on every linear it targets; type "hadamard" is
// computed by hadacore (Sylvester's matrix, powers of two only); vLLM's fused linears need one input transform for all
// their shards ("Must have same input"), and its fused MoE has no transform method at all.
void CheckTransforms(const Json& qc, const checkpoint::ModelConfig& model, const checkpoint::CheckpointReader& reader,
                     std::vector<std::string>& out) {
  auto transforms = CtInputTransforms(qc.contains("transform_config") ? qc["transform_config"] : Json());
  if (!transforms.ok()) {
    out.push_back(std::string(transforms.status().message()));
    return;
  }
  if (transforms->empty()) return;
  // (scheme, n) -> whether some targeted module stores the shared matrix; the modules that do not store one.
  std::map<std::pair<std::string, int64_t>, bool> stored;
  std::vector<std::tuple<std::string, std::string, int64_t>> tied;
  for (int64_t i = 0; i < model.num_hidden_layers; ++i) {
    std::map<std::string, std::vector<std::pair<std::string, std::string>>> fused;  // key -> (shard, scheme or "")
    for (const checkpoint::LinearSpec& linear : checkpoint::LayerLinears(model, i)) {
      const std::string name = checkpoint::LayerPrefix(model, i) + linear.relative_name;
      const CtInputTransform* t = CtInputTransformFor(*transforms, name);
      if (const std::string key = FusedGroupKey(name); key != name && !linear.routed) {
        fused[key].push_back({name, t ? t->scheme : ""});
      }
      if (t == nullptr) continue;
      if (linear.routed) {
        out.push_back(StrCat(name, ": an online transform (", t->scheme, ") on a routed expert; vLLM's fused MoE "
                                   "applies none"));
        continue;
      }
      const int64_t n = linear.in_features;
      const std::string matrix = CtTransformWeightName(name, t->scheme, "input");
      if (reader.Has(matrix)) {
        CheckTensors({{matrix, {StDType::kF32, StDType::kBF16, StDType::kF16}, {n, n}}}, reader, out);
        stored[{t->scheme, n}] = true;
      } else {
        tied.emplace_back(name, t->scheme, n);  // a tied copy: the library's save keeps the first module's only
      }
      if (t->type == "hadamard" && (n & (n - 1)) != 0) {
        out.push_back(StrCat(name, ": transform ", t->scheme, " is type \"hadamard\", which vLLM computes with hadacore "
                                   "(Sylvester's matrix, a power of two), but in_features is ", n,
                                   "; use \"random-hadamard\" (a dense product with the stored matrix)"));
      }
    }
    for (const auto& [key, shards] : fused) {
      for (const auto& [name, scheme] : shards) {
        if (scheme != shards.front().second) {
          out.push_back(StrCat(name, ": online input transform \"", scheme, "\" differs from ", shards.front().first,
                               "'s \"", shards.front().second, "\" (vLLM fuses them into ", key, "_proj)"));
        }
      }
    }
  }
  for (const auto& [name, scheme, n] : tied) {
    if (!stored.count({scheme, n})) {
      out.push_back(StrCat(CtTransformWeightName(name, scheme, "input"), ": missing, and no module of transform ",
                           scheme, " stores a [", n, ", ", n, "] matrix"));
    }
  }
}

absl::StatusOr<Json> ReadJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(StrCat(path, ": cannot open"));
  std::stringstream text;
  text << in.rdbuf();
  Json j = Json::parse(text.str(), nullptr, false);
  if (j.is_discarded()) return absl::InvalidArgumentError(StrCat(path, ": not valid JSON"));
  return j;
}

void CheckLayer(const Json& qc, const checkpoint::ModelConfig& model, const checkpoint::CheckpointReader& reader,
                int64_t layer, std::vector<std::string>& out) {
  const std::string prefix = checkpoint::LayerPrefix(model, layer);
  std::map<std::string, std::vector<std::pair<std::string, Json>>> fused_groups;
  std::map<std::string, std::vector<std::pair<std::string, float>>> globals;
  std::vector<std::string> routed;
  for (const checkpoint::LinearSpec& linear : checkpoint::LayerLinears(model, layer)) {
    const std::string name = prefix + linear.relative_name;
    const Json g = CtGroupFor(qc, name);
    // A routed expert's scheme follows its MoE block (CtMoeProblems); the shards vLLM fuses into one linear (q/k/v,
    // gate/up, MLA's q_a/kv_a: FusedGroupKey) follow the first shard's, as its should_ignore_layer and
    // find_matched_target require with the model's packed_modules_mapping.
    if (linear.routed) {
      routed.push_back(name);
    } else if (const std::string key = FusedGroupKey(name); key != name) {
      fused_groups[key].push_back({name, g});
    }
    if (g.is_null()) {
      if (!reader.Has(name + ".weight")) out.push_back(StrCat(name, ".weight: an ignored linear without its weight"));
      continue;
    }
    const std::string format =
        g.contains("format") && g["format"].is_string() ? g["format"].get<std::string>() : JsonString(qc, "format");
    auto scheme = VllmCtScheme(g, format);
    // MX: the library defines and decodes it, vLLM's loader has no scheme for it (a warning: CtVllmLoadWarnings).
    if (!scheme.ok() && !IsCtMxFormat(format)) out.push_back(StrCat(name, ": ", std::string(scheme.status().message())));
    CheckTensors(ExpectedTensors(name, g, format, linear.out_features, linear.in_features, out), reader, out);
    if (linear.has_bias && !reader.Has(name + ".bias")) out.push_back(StrCat(name, ".bias: missing"));
    if (format == "nvfp4-pack-quantized") {
      // The engine's own grouping of shared global scales (q/k/v, gate/up, each expert's gate/up as vLLM's w13).
      if (auto v = ScalarF32(reader, name + ".weight_global_scale")) {
        globals[Nvfp4GlobalScaleKey(name)].push_back({name, *v});
      }
    }
    if (format == "pack-quantized") {
      auto shape = reader.Get(name + ".weight_shape");
      if (shape.ok() && shape->info->dtype == StDType::kI64 && shape->info->NumElements() == 2) {
        int64_t nk[2];
        std::memcpy(nk, shape->bytes().data(), sizeof(nk));
        if (nk[0] != linear.out_features || nk[1] != linear.in_features) {
          out.push_back(StrCat(name, ".weight_shape: (", nk[0], ", ", nk[1], "), expected (", linear.out_features, ", ",
                               linear.in_features, ")"));
        }
      }
    }
  }
  for (const auto& [fused, shards] : fused_groups) {
    for (const auto& [name, g] : shards) {
      if (g != shards.front().second) {
        out.push_back(StrCat(name, ": in a config group other than ", shards.front().first, "'s (vLLM fuses them into ",
                             fused, "_proj)"));
      }
    }
  }
  const std::vector<std::string> moe = CtMoeProblems(qc, routed);
  out.insert(out.end(), moe.begin(), moe.end());
  // vLLM takes the max of the shards' global scales (an MoE expert's w13: the gate's) and warns the fp8 block scales
  // "should be recomputed".
  for (const auto& [fused, shards] : globals) {
    for (const auto& [name, v] : shards) {
      if (v != shards.front().second) {
        out.push_back(StrCat(name, ".weight_global_scale: ", v, " differs from ", shards.front().first, "'s ",
                             shards.front().second, " (NVFP4 fused shards share one global scale)"));
      }
    }
  }
}

}  // namespace

std::vector<std::string> CtQuantizationConfigProblems(const Json& qc) {
  std::vector<std::string> out;
  if (JsonString(qc, "quant_method") != "compressed-tensors") out.push_back("quant_method: not \"compressed-tensors\"");
  for (const char* key : {"config_groups", "format", "ignore", "quantization_status", "version"}) {
    if (!qc.contains(key)) out.push_back(StrCat(key, ": missing"));
  }
  if (!qc.contains("config_groups") || !qc["config_groups"].is_object()) return out;
  const std::string global = JsonString(qc, "format");
  if (global != "mixed-precision" && !kFormats.count(global)) out.push_back(StrCat("format: \"", global, "\" unknown"));
  for (const auto& [name, g] : qc["config_groups"].items()) {
    const std::string path = "config_groups." + name;
    if (!g.is_object()) {
      out.push_back(StrCat(path, ": not a QuantizationScheme"));
      continue;
    }
    for (const auto& [key, v] : g.items()) {
      if (!kSchemeKeys.count(key))
        out.push_back(StrCat(path, ".", key, ": not a QuantizationScheme field (extra=forbid)"));
    }
    if (!g.contains("targets") || !g["targets"].is_array()) out.push_back(StrCat(path, ".targets: missing"));
    if (g.contains("weights") && !g["weights"].is_null()) ArgsProblems(g["weights"], path + ".weights", false, out);
    for (const char* a : {"input_activations", "output_activations"}) {
      if (g.contains(a) && !g[a].is_null()) ArgsProblems(g[a], StrCat(path, ".", a), true, out);
    }
    const std::string format =
        g.contains("format") && g["format"].is_string() ? g["format"].get<std::string>() : global;
    if (!kFormats.count(format)) out.push_back(StrCat(path, ".format: \"", format, "\" is not a compression format"));
  }
  return out;
}

std::vector<std::string> CtArgsProblems(const Json& args, const std::string& path, bool activation) {
  std::vector<std::string> out;
  ArgsProblems(args, path, activation, out);
  return out;
}

Json CtGroupFor(const Json& qc, const std::string& module) {
  if (qc.contains("ignore") && qc["ignore"].is_array()) {
    for (const Json& e : qc["ignore"]) {
      if (e.is_string() && CtNameMatches(e.get<std::string>(), module)) return Json();
    }
  }
  if (!qc.contains("config_groups") || !qc["config_groups"].is_object()) return Json();
  // vLLM's find_matched_target: the first name or "re:" target over every group in order, then a class name.
  for (const bool by_class : {false, true}) {
    for (const auto& [name, g] : qc["config_groups"].items()) {
      if (!g.is_object() || !g.contains("targets") || !g["targets"].is_array()) continue;
      for (const Json& t : g["targets"]) {
        if (!t.is_string()) continue;
        const std::string s = t.get<std::string>();
        if (by_class ? s == "Linear" : (s != "Linear" && CtNameMatches(s, module))) return g;
      }
    }
  }
  return Json();
}

bool IsCtMxFormat(std::string_view format) {
  return format == "mxfp4-pack-quantized" || format == "mxfp8-quantized";
}

std::vector<std::string> CtVllmLoadWarnings(const Json& qc) {
  std::vector<std::string> out;
  if (!qc.is_object() || !qc.contains("config_groups") || !qc["config_groups"].is_object()) return out;
  for (const auto& [name, g] : qc["config_groups"].items()) {
    const std::string format =
        g.contains("format") && g["format"].is_string() ? g["format"].get<std::string>() : JsonString(qc, "format");
    if (IsCtMxFormat(format)) {
      out.push_back(StrCat("config_groups.", name, ": ", format, " is compressed-tensors' own MX layout, but vLLM's ",
                           "compressed_tensors loader (_get_scheme_from_parts, formats-2026.md 2.5) has no MX scheme; ",
                           "export hf_quark for vLLM's QuarkOCP_MX"));
    }
  }
  auto transforms = CtInputTransforms(qc.contains("transform_config") ? qc["transform_config"] : Json());
  if (transforms.ok() && !transforms->empty()) {
    out.push_back("transform_config: vLLM applies online transforms with tensor parallelism 1 only (\"Online "
                  "transforms with tensor parallelism is not supported\")");
  }
  return out;
}

absl::StatusOr<std::string> VllmCtScheme(const Json& g, const std::string& format) {
  const Json& w = g.contains("weights") ? g["weights"] : Json();
  const Json& a = g.contains("input_activations") ? g["input_activations"] : Json();
  const bool has_input = a.is_object();
  const bool w_static = w.is_object() && !Dynamic(w);
  const bool w_sym = w.value("symmetric", false);
  const std::string ws = JsonString(w, "strategy"), wt = JsonString(w, "type"), as = JsonString(a, "strategy"),
                    at = JsonString(a, "type");
  const int64_t wb = JsonInt(w, "num_bits"), ab = JsonInt(a, "num_bits");
  auto nvfp4 = [](const Json& x) {
    return JsonString(x, "type") == "float" && JsonInt(x, "num_bits") == 4 &&
           JsonString(x, "strategy") == "tensor_group" && JsonInt(x, "group_size") == 16 && x.value("symmetric", false);
  };
  if (!has_input && nvfp4(w) && w_static) return std::string("CompressedTensorsW4A16Fp4");
  if (!has_input && wt == "int" && w_static && (ws == "channel" || ws == "group")) {
    if (format != "pack-quantized")
      return absl::FailedPreconditionError(StrCat("WNA16 needs pack-quantized, not ", format));
    const bool supported = w_sym ? (wb >= 2 && wb <= 8) : (wb == 4 || wb == 8);
    if (!supported)
      return absl::FailedPreconditionError(StrCat("WNA16: ", wb, "-bit ", w_sym ? "symmetric" : "asymmetric"));
    return std::string("CompressedTensorsWNA16");
  }
  if (has_input && nvfp4(w) && nvfp4(a)) return std::string("CompressedTensorsW4A4Fp4");
  const bool fp8_w =
      wt == "float" && wb == 8 && w_sym && w_static && (ws == "tensor" || ws == "channel" || ws == "block");
  if (fp8_w && has_input && at == "float" && ab == 8 &&
      (Dynamic(a) || (a.value("symmetric", false) && as == "tensor"))) {
    return std::string("CompressedTensorsW8A8Fp8");
  }
  if (fp8_w && !has_input) return std::string("CompressedTensorsW8A16Fp8");
  const bool int8_w = wt == "int" && wb == 8 && w_sym && w_static && (ws == "tensor" || ws == "channel");
  if (int8_w && has_input && at == "int" && ab == 8 &&
      ((!Dynamic(a) && as == "tensor") || (Dynamic(a) && as == "token"))) {
    return std::string("CompressedTensorsW8A8Int8");
  }
  return absl::FailedPreconditionError("No compressed-tensors compatible scheme was found.");
}

absl::Status CheckCompressedTensorsExport(const std::string& dir) {
  auto config = ReadJson(dir + "/config.json");
  if (!config.ok()) return config.status();
  if (!config->contains("quantization_config")) {
    return absl::FailedPreconditionError(StrCat(dir, "/config.json: no quantization_config"));
  }
  const Json& qc = (*config)["quantization_config"];
  std::vector<std::string> problems = CtQuantizationConfigProblems(qc);
  if (problems.empty()) {
    auto model = checkpoint::ParseModelConfig(config->dump(), dir + "/config.json");
    if (!model.ok()) return model.status();
    if (auto s = CtSupportsExperts(*model); !s.ok()) problems.push_back(std::string(s.message()));
    auto reader = checkpoint::CheckpointReader::Open(dir);
    if (!reader.ok()) return reader.status();
    for (int64_t i = 0; i < model->num_hidden_layers && problems.empty(); ++i)
      CheckLayer(qc, *model, **reader, i, problems);
    if (problems.empty()) CheckTransforms(qc, *model, **reader, problems);
    // The routers (DeepSeek's with e_score_correction_bias) stay float: vLLM builds them without quantization.
    for (std::string& p : MoeRouterProblems(*model, **reader)) problems.push_back(std::move(p));
    // DeepSeek's MTP layers are copied float; vLLM's MTP drafter builds their decoder block with this config, so
    // every linear of theirs must be ignored.
    for (const checkpoint::TensorSpec& spec : checkpoint::ModelTensors(*model)) {
      if (spec.role != checkpoint::TensorRole::kLinearWeight || !checkpoint::IsOutsideForward(*model, spec.name)) continue;
      const std::string module = spec.name.substr(0, spec.name.rfind('.'));
      if (!CtGroupFor(qc, module).is_null()) {
        problems.push_back(StrCat(module, ": an MTP layer's linear, copied float, is not in ignore (vLLM's MTP drafter "
                                          "would load it quantized)"));
      }
    }
  }
  if (problems.empty()) return absl::OkStatus();
  const size_t shown = std::min<size_t>(problems.size(), 20);
  return absl::FailedPreconditionError(StrCat(
      "compressed-tensors export ", dir, " breaks ", problems.size(),
      " consumer rule(s): ", StrJoin(std::vector<std::string>(problems.begin(), problems.begin() + shown), "; ")));
}

}  // namespace quark::exporter
