#include "core/config/quark_json.h"

#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <type_traits>

#include "core/base/overloaded.h"
#include "core/base/strings.h"
#include "core/base/status_macros.h"
#include "core/config/autoround_json.h"  // #35 AutoRound
#include "core/config/e8m0_tiles.h"  // #30 E8M0 tiles
#include "core/config/json_read.h"
#include "core/config/rotation_json.h"  // #35 learned rotation
#include "core/config/quark_json_two_stage.h"

namespace quark {
namespace {

using OrderedJson = nlohmann::ordered_json;

// Quark's exported config.json names the observer class; per-tensor/channel/group variants of MinMax.
std::string ObserverClassName(const QuantSpec& s) {
  switch (s.observer) {
    case ObserverKind::kPercentile: return "PerTensorPercentileObserver";
    case ObserverKind::kMse: return "PerTensorMSEObserver";
    case ObserverKind::kMxBlock: return "PerBlockMXObserver";
    // #35: Quark has no imatrix observer class and its loaders import the one named; the scales are in the file, so
    // the MinMax class of the granularity stands in (the checkpoint fingerprint records the observer separately).
    case ObserverKind::kImatrixMse:
    case ObserverKind::kMinMax: break;
  }
  switch (s.qscheme) {
    case QScheme::kPerChannel: return "PerChannelMinMaxObserver";
    case QScheme::kPerGroup: return "PerGroupMinMaxObserver";
    case QScheme::kPerBlock: return "PerBlock2DMinMaxObserver";
    case QScheme::kPerTensor: break;
  }
  return "PerTensorMinMaxObserver";
}

OrderedJson OptionalInt(const std::optional<int>& v) { return v ? OrderedJson(*v) : OrderedJson(nullptr); }

// ---- Reading, with the key path in every error ----

template <typename Enum>
absl::Status ReadEnum(const OrderedJson& j, const char* key, const std::string& path,
                      std::optional<Enum> (*parse)(std::string_view), Enum& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_string()) {
    return absl::InvalidArgumentError(StrCat(path, ".", key, ": expected a string, got ", it->dump()));
  }
  const std::string value = it->get<std::string>();
  auto parsed = parse(value);
  if (!parsed) {
    return absl::InvalidArgumentError(StrCat(path, ".", key, ": unknown value \"", value, "\" (one of: ",
                                                   StrJoin(AllNames<Enum>(), ", "), ")"));
  }
  out = *parsed;
  return absl::OkStatus();
}

// A JSON number as `Number`, refused when it does not fit (found by config_json_fuzz): get<int>() of 1e93 is
// undefined behaviour and of 4294967424 silently 128; a float field given 1e300 would hold inf, which JSON cannot
// write back. An integer field takes a float only when it has no fraction (128.0).
template <typename Number>
absl::Status JsonToNumber(const OrderedJson& value, const std::string& where, Number& out) {
  using Limits = std::numeric_limits<Number>;
  if constexpr (std::is_integral_v<Number>) {
    bool fits = false;
    if (value.is_number_unsigned()) {
      fits = value.get<uint64_t>() <= static_cast<uint64_t>(Limits::max());
    } else if (value.is_number_integer()) {
      const int64_t n = value.get<int64_t>();
      fits = n >= static_cast<int64_t>(Limits::min()) && n <= static_cast<int64_t>(Limits::max());
    } else {
      const double d = value.get<double>();
      fits = std::trunc(d) == d && d >= static_cast<double>(Limits::min()) && d <= static_cast<double>(Limits::max());
    }
    if (!fits) {
      return absl::InvalidArgumentError(StrCat(where, ": expected an integer from ", Limits::min(), " to ",
                                               Limits::max(), ", got ", value.dump()));
    }
    out = value.is_number_float() ? static_cast<Number>(value.get<double>()) : static_cast<Number>(value.get<int64_t>());
  } else {
    const double d = value.get<double>();
    if (!(std::fabs(d) <= static_cast<double>(Limits::max()))) {
      return absl::InvalidArgumentError(StrCat(where, ": ", value.dump(), " is out of range"));
    }
    out = static_cast<Number>(d);
  }
  return absl::OkStatus();
}

absl::Status ReadOptionalInt(const OrderedJson& j, const char* key, const std::string& path, std::optional<int>& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_number_integer()) {
    return absl::InvalidArgumentError(StrCat(path, ".", key, ": expected an integer or null, got ", it->dump()));
  }
  int value = 0;
  QUARK_RETURN_IF_ERROR(JsonToNumber(*it, StrCat(path, ".", key), value));
  out = value;
  return absl::OkStatus();
}

template <typename Number>
absl::Status ReadNumber(const OrderedJson& j, const char* key, const std::string& path, Number& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_number()) {
    return absl::InvalidArgumentError(StrCat(path, ".", key, ": expected a number, got ", it->dump()));
  }
  return JsonToNumber(*it, StrCat(path, ".", key), out);
}

absl::Status ReadString(const OrderedJson& j, const char* key, const std::string& path, std::string& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_string()) {
    return absl::InvalidArgumentError(StrCat(path, ".", key, ": expected a string, got ", it->dump()));
  }
  out = it->get<std::string>();
  return absl::OkStatus();
}

absl::Status ReadStringList(const OrderedJson& j, const char* key, const std::string& path,
                            std::vector<std::string>& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_array()) {
    return absl::InvalidArgumentError(StrCat(path, ".", key, ": expected a list of strings, got ", it->dump()));
  }
  out.clear();
  for (size_t i = 0; i < it->size(); ++i) {
    if (!(*it)[i].is_string()) {
      return absl::InvalidArgumentError(StrCat(path, ".", key, "[", i, "]: expected a string, got ",
                                                     (*it)[i].dump()));
    }
    out.push_back((*it)[i].get<std::string>());
  }
  return absl::OkStatus();
}

OrderedJson ScalingLayersToJson(const std::vector<ScalingLayer>& layers) {
  OrderedJson out = OrderedJson::array();
  for (const auto& l : layers) {
    OrderedJson entry = {{"prev_op", l.prev_op}, {"layers", l.layers}, {"inp", l.inp}};
    if (!l.module2inspect.empty()) entry["module2inspect"] = l.module2inspect;
    out.push_back(std::move(entry));
  }
  return out;
}

absl::Status ReadScalingLayers(const OrderedJson& j, const std::string& path, std::vector<ScalingLayer>& out) {
  auto it = j.find("scaling_layers");
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_array()) return absl::InvalidArgumentError(path + ".scaling_layers: expected a list");
  for (size_t i = 0; i < it->size(); ++i) {
    const OrderedJson& e = (*it)[i];
    const std::string p = StrCat(path, ".scaling_layers[", i, "]");
    if (!e.is_object()) return absl::InvalidArgumentError(p + ": expected an object");
    ScalingLayer layer;
    QUARK_RETURN_IF_ERROR(ReadString(e, "prev_op", p, layer.prev_op));
    QUARK_RETURN_IF_ERROR(ReadStringList(e, "layers", p, layer.layers));
    QUARK_RETURN_IF_ERROR(ReadString(e, "inp", p, layer.inp));
    QUARK_RETURN_IF_ERROR(ReadString(e, "module2inspect", p, layer.module2inspect));
    out.push_back(std::move(layer));
  }
  return absl::OkStatus();
}

OrderedJson AlgoToJson(const AlgoConfig& algo) {
  OrderedJson j = {{"name", std::string(AlgoName(algo))}};
  std::visit(Overloaded{
                 [&](const SmoothQuantAlgo& a) {
                   j["alpha"] = a.alpha;
                   j["scale_clamp_min"] = a.scale_clamp_min;
                   j["scaling_layers"] = ScalingLayersToJson(a.scaling_layers);
                   j["model_decoder_layers"] = a.model_decoder_layers;
                 },
                 [&](const AutoSmoothQuantAlgo& a) {
                   j["scaling_layers"] = ScalingLayersToJson(a.scaling_layers);
                   j["compute_scale_loss"] = a.compute_scale_loss;
                   j["model_decoder_layers"] = a.model_decoder_layers;
                 },
                 [&](const AwqAlgo& a) {
                   j["scaling_layers"] = ScalingLayersToJson(a.scaling_layers);
                   j["model_decoder_layers"] = a.model_decoder_layers;
                   // Quark's AWQConfig has no grid_size (QConfig.from_dict builds it with cls(**dict), which refuses
                   // unknown keys): written only when it departs from the default 20, which a reader assumes.
                   if (a.grid_size != AwqAlgo{}.grid_size) j["grid_size"] = a.grid_size;
                 },
                 [&](const GptqAlgo& a) {
                   if (a.method != HessianMethod::kQronos) j["damp_percent"] = a.damp_percent;
                   j["desc_act"] = a.desc_act;
                   j["static_groups"] = a.static_groups;
                   // Likewise Quark's GPTQConfig has no true_sequential: written only when false.
                   if (a.method == HessianMethod::kGptq && !a.true_sequential) j["true_sequential"] = false;
                   if (a.method != HessianMethod::kGptq) j["alpha"] = a.alpha;
                   if (a.method == HessianMethod::kQronos) j["beta"] = a.beta;
                   j["inside_layer_modules"] = a.inside_layer_modules;
                   j["model_decoder_layers"] = a.model_decoder_layers;
                   j["block_size"] = a.block_size;
                 },
                 [&](const RotationAlgo& a) {
                   RotationFieldsToJson(a, j);
                   j["scaling_layers"] = ScalingLayersToJson(a.scaling_layers);
                 },
                 [&](const AutoRoundAlgo& a) { AutoRoundToJson(a, j); },  // #35 AutoRound
             },
             algo);
  return j;
}

// The fields GPTQ, GPTAQ and Qronos share.
absl::Status ReadGptqFamilyFields(const OrderedJson& j, const std::string& path, GptqAlgo& a) {
  QUARK_RETURN_IF_ERROR(ReadJsonBool(j, "desc_act", path, a.desc_act));
  QUARK_RETURN_IF_ERROR(ReadJsonBool(j, "static_groups", path, a.static_groups));
  QUARK_RETURN_IF_ERROR(ReadStringList(j, "inside_layer_modules", path, a.inside_layer_modules));
  QUARK_RETURN_IF_ERROR(ReadString(j, "model_decoder_layers", path, a.model_decoder_layers));
  return ReadNumber(j, "block_size", path, a.block_size);
}

// GPTAQ and Qronos as Quark 0.13 reads them (GPTAQConfig, QronosConfig): their fields only, Quark's defaults.
absl::StatusOr<AlgoConfig> AsymmetricAlgoFromJson(const OrderedJson& j, const std::string& name,
                                                  const std::string& path) {
  const bool qronos = name == "qronos";
  const std::set<std::string> fields =
      qronos ? std::set<std::string>{"name", "block_size", "desc_act", "static_groups", "alpha", "beta",
                                     "inside_layer_modules", "model_decoder_layers"}
             : std::set<std::string>{"name", "block_size", "damp_percent", "alpha", "desc_act", "static_groups",
                                     "inside_layer_modules", "model_decoder_layers"};
  for (const auto& item : j.items()) {
    if (fields.count(item.key()) == 0) {
      return absl::InvalidArgumentError(StrCat(path, ".", item.key(), ": not a field of Quark's ", name, " config"));
    }
  }
  GptqAlgo a;
  a.method = qronos ? HessianMethod::kQronos : HessianMethod::kGptaq;
  a.alpha = qronos ? 1e-3 : 0.25;
  if (!qronos) QUARK_RETURN_IF_ERROR(ReadNumber(j, "damp_percent", path, a.damp_percent));
  QUARK_RETURN_IF_ERROR(ReadNumber(j, "alpha", path, a.alpha));
  if (qronos) QUARK_RETURN_IF_ERROR(ReadNumber(j, "beta", path, a.beta));
  QUARK_RETURN_IF_ERROR(ReadGptqFamilyFields(j, path, a));
  return AlgoConfig(a);
}

absl::StatusOr<AlgoConfig> AlgoFromJson(const OrderedJson& j, const std::string& path) {
  if (!j.is_object()) return absl::InvalidArgumentError(path + ": expected an object");
  std::string name;
  QUARK_RETURN_IF_ERROR(ReadString(j, "name", path, name));
  if (name == "smooth" || name == "smoothquant") {
    SmoothQuantAlgo a;
    QUARK_RETURN_IF_ERROR(ReadNumber(j, "alpha", path, a.alpha));
    QUARK_RETURN_IF_ERROR(ReadNumber(j, "scale_clamp_min", path, a.scale_clamp_min));
    QUARK_RETURN_IF_ERROR(ReadScalingLayers(j, path, a.scaling_layers));
    QUARK_RETURN_IF_ERROR(ReadString(j, "model_decoder_layers", path, a.model_decoder_layers));
    return AlgoConfig(a);
  }
  if (name == "autosmoothquant") {
    AutoSmoothQuantAlgo a;
    QUARK_RETURN_IF_ERROR(ReadScalingLayers(j, path, a.scaling_layers));
    QUARK_RETURN_IF_ERROR(ReadString(j, "compute_scale_loss", path, a.compute_scale_loss));
    QUARK_RETURN_IF_ERROR(ReadString(j, "model_decoder_layers", path, a.model_decoder_layers));
    return AlgoConfig(a);
  }
  if (name == "awq") {
    AwqAlgo a;
    QUARK_RETURN_IF_ERROR(ReadScalingLayers(j, path, a.scaling_layers));
    QUARK_RETURN_IF_ERROR(ReadString(j, "model_decoder_layers", path, a.model_decoder_layers));
    QUARK_RETURN_IF_ERROR(ReadNumber(j, "grid_size", path, a.grid_size));
    return AlgoConfig(a);
  }
  if (name == "gptq") {
    GptqAlgo a;
    QUARK_RETURN_IF_ERROR(ReadNumber(j, "damp_percent", path, a.damp_percent));
    QUARK_RETURN_IF_ERROR(ReadJsonBool(j, "true_sequential", path, a.true_sequential));
    QUARK_RETURN_IF_ERROR(ReadGptqFamilyFields(j, path, a));
    return AlgoConfig(a);
  }
  if (name == "rotation") {
    RotationAlgo a;
    QUARK_RETURN_IF_ERROR(RotationFieldsFromJson(j, path, a));
    QUARK_RETURN_IF_ERROR(ReadScalingLayers(j, path, a.scaling_layers));
    return AlgoConfig(a);
  }
  if (name == "gptaq" || name == "qronos") return AsymmetricAlgoFromJson(j, name, path);
  if (name == "autoround") {  // #35 AutoRound: auto-round's names, Quark has none
    QUARK_ASSIGN_OR_RETURN(AutoRoundAlgo a, AutoRoundFromJson(j, path));
    return AlgoConfig(a);
  }
  for (const char* known : {"quarot", "svdquant"}) {
    if (name == known) {
      return absl::UnimplementedError(StrCat(path, ": Quark's ", name, " is not implemented by this engine"));
    }
  }
  return absl::InvalidArgumentError(StrCat(
      path, ".name: unknown algorithm \"", name,
      "\" (one of: smooth, autosmoothquant, awq, gptq, gptaq, qronos, rotation, autoround)"));
}

absl::Status ReadPatternConfigs(const OrderedJson& j, const char* key, std::vector<PatternQuantConfig>& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_object()) return absl::InvalidArgumentError(StrCat(key, ": expected an object of pattern: config"));
  for (const auto& [pattern, value] : it->items()) {
    auto layer = LayerConfigFromQuarkJson(value, StrCat(key, "[", pattern, "]"));
    if (!layer.ok()) return layer.status();
    out.push_back(PatternQuantConfig{pattern, *std::move(layer)});
  }
  return absl::OkStatus();
}

OrderedJson PatternConfigsToJson(const std::vector<PatternQuantConfig>& entries) {
  OrderedJson out = OrderedJson::object();
  for (const auto& e : entries) out[e.pattern] = LayerConfigToQuarkJson(e.config);
  return out;
}

}  // namespace

OrderedJson QuantSpecToQuarkJson(const QuantSpec& s) {
  OrderedJson j;
  j["dtype"] = std::string(Name(s.dtype));
  j["qscheme"] = std::string(Name(s.qscheme));
  j["observer_cls"] = ObserverClassName(s);
  j["is_dynamic"] = s.is_dynamic;
  j["symmetric"] = s.symmetric;
  j["ch_axis"] = OptionalInt(s.ch_axis);
  j["group_size"] = OptionalInt(s.group_size);
  j["block_size"] = s.block_size.empty() ? OrderedJson(nullptr) : OrderedJson(s.block_size);
  j["round_method"] = std::string(Name(s.round_method));
  j["scale_type"] = std::string(Name(s.scale_type));
  j["scale_format"] = std::string(Name(s.scale_format));
  j["scale_calculation_mode"] = std::string(Name(s.scale_calculation_mode));
  j["mx_element_dtype"] =
      s.mx_element_dtype ? OrderedJson(std::string(Name(*s.mx_element_dtype))) : OrderedJson(nullptr);
  j["zero_point_type"] = std::string(Name(s.zero_point_type));
  if (s.observer == ObserverKind::kPercentile) j["percentile"] = s.percentile;
  if (IsE8m0Tiles(s)) {
    // #30: vLLM dispatches E8M0 tiles on scale_type float8_e8m0fnu; Quark's importer decodes the stored bytes as
    // 2^(b - 127) only under scale_format "e8m0" (StaticRealQuantizer.unpack_params; without it a uint8 scale is
    // multiplied as the integer b), so both are written. Exports before this wrote scale_format null; read alike.
    j["scale_type"] = kE8m0ScaleTypeName;
    j["scale_format"] = std::string(Name(ScaleFormat::kE8M0));
  }
  return j;
}

absl::StatusOr<AlgoConfig> AlgoConfigFromQuarkJson(const OrderedJson& j, const std::string& path) {
  return AlgoFromJson(j, path);
}

absl::StatusOr<QuantSpec> QuantSpecFromQuarkJson(const OrderedJson& j, const std::string& path) {
  if (!j.is_object()) return absl::InvalidArgumentError(path + ": expected a tensor spec object, got " + j.dump());
  if (!j.contains("dtype") || j["dtype"].is_null()) return absl::InvalidArgumentError(path + ".dtype: required");
  QuantSpec s;
  QUARK_RETURN_IF_ERROR(ReadEnum(j, "dtype", path, &ParseDType, s.dtype));
  QUARK_RETURN_IF_ERROR(ReadEnum(j, "qscheme", path, &ParseQScheme, s.qscheme));
  // "observer" (our short names, also accepted by the CLI) or Quark's "observer_cls" class names.
  QUARK_RETURN_IF_ERROR(ReadEnum(j, "observer", path, &ParseObserverKind, s.observer));
  QUARK_RETURN_IF_ERROR(ReadEnum(j, "observer_cls", path, &ParseObserverKind, s.observer));
  QUARK_RETURN_IF_ERROR(ReadJsonBool(j, "is_dynamic", path, s.is_dynamic));
  QUARK_RETURN_IF_ERROR(ReadJsonBool(j, "symmetric", path, s.symmetric));
  QUARK_RETURN_IF_ERROR(ReadOptionalInt(j, "ch_axis", path, s.ch_axis));
  QUARK_RETURN_IF_ERROR(ReadOptionalInt(j, "group_size", path, s.group_size));
  if (auto it = j.find("block_size"); it != j.end() && !it->is_null()) {
    if (!it->is_array() || it->size() != 2 || !(*it)[0].is_number_integer() || !(*it)[1].is_number_integer()) {
      return absl::InvalidArgumentError(StrCat(path, ".block_size: expected [rows, cols], got ", it->dump()));
    }
    s.block_size = {(*it)[0].get<int>(), (*it)[1].get<int>()};
  }
  QUARK_RETURN_IF_ERROR(ReadEnum(j, "round_method", path, &ParseRoundMethod, s.round_method));
  // #30: Quark's scale_type "float8_e8m0fnu" is E8M0 tile scales on an fp8 per_block weight (scale_format e8m0
  // here); everywhere else the engine has no such scale.
  const auto scale_type = j.find("scale_type");
  const bool e8m0_scale_type = scale_type != j.end() && scale_type->is_string() &&
                               scale_type->get<std::string>() == kE8m0ScaleTypeName;
  if (!e8m0_scale_type) QUARK_RETURN_IF_ERROR(ReadEnum(j, "scale_type", path, &ParseScaleType, s.scale_type));
  QUARK_RETURN_IF_ERROR(ReadEnum(j, "scale_format", path, &ParseScaleFormat, s.scale_format));
  QUARK_RETURN_IF_ERROR(
      ReadEnum(j, "scale_calculation_mode", path, &ParseScaleCalculationMode, s.scale_calculation_mode));
  if (auto it = j.find("mx_element_dtype"); it != j.end() && !it->is_null()) {
    DType element = DType::kFp4;
    QUARK_RETURN_IF_ERROR(ReadEnum(j, "mx_element_dtype", path, &ParseDType, element));
    s.mx_element_dtype = element;
  }
  QUARK_RETURN_IF_ERROR(ReadEnum(j, "zero_point_type", path, &ParseZeroPointType, s.zero_point_type));
  QUARK_RETURN_IF_ERROR(ReadNumber(j, "percentile", path, s.percentile));
  if (e8m0_scale_type) {
    if (s.qscheme != QScheme::kPerBlock || s.scale_format == ScaleFormat::kE4M3) {
      return absl::InvalidArgumentError(StrCat(path, ".scale_type: ", kE8m0ScaleTypeName, " (E8M0 tile scales) needs ",
                                               "qscheme per_block and no other scale_format, got ", Name(s.qscheme),
                                               " with scale_format ", Name(s.scale_format)));
    }
    s.scale_format = ScaleFormat::kE8M0;
  }
  // The tile scales are float32 powers of two whatever scale_type a config names (one spelling, so round trips equal).
  if (IsE8m0Tiles(s)) s.scale_type = ScaleType::kFloat32;
  // NVFP4 in one spec (Quark's scale_format "e4m3"): block and global amax, whatever observer class is named.
  if (s.scale_format == ScaleFormat::kE4M3) s.observer = ObserverKind::kMinMax;
  // Quark's MX observer implies the MX layout when a config names only the observer.
  if (s.observer == ObserverKind::kMxBlock && s.dtype != DType::kMx && !j.contains("scale_format")) {
    s.scale_format = ScaleFormat::kE8M0;
  }
  return s;
}

OrderedJson LayerConfigToQuarkJson(const LayerQuantConfig& c) {
  auto spec = [](const std::optional<QuantSpec>& s) {
    if (!s) return OrderedJson(nullptr);
    if (s->IsProgressive()) return ProgressiveToQuarkJson(*s);
    return s->IsNvfp4() ? Nvfp4ToQuarkJson(*s) : QuantSpecToQuarkJson(*s);
  };
  return OrderedJson{{"input_tensors", spec(c.input_tensors)},
                     {"output_tensors", spec(c.output_tensors)},
                     {"weight", spec(c.weight)},
                     {"bias", spec(c.bias)},
                     {"target_device", nullptr}};
}

absl::StatusOr<LayerQuantConfig> LayerConfigFromQuarkJson(const OrderedJson& j, const std::string& path) {
  if (!j.is_object()) return absl::InvalidArgumentError(path + ": expected an object, got " + j.dump());
  LayerQuantConfig c;
  struct Field {
    const char* key;
    std::optional<QuantSpec>* target;
  };
  for (Field f : {Field{"input_tensors", &c.input_tensors}, Field{"output_tensors", &c.output_tensors},
                  Field{"weight", &c.weight}, Field{"bias", &c.bias}}) {
    auto it = j.find(f.key);
    if (it == j.end() || it->is_null()) continue;
    // Quark allows a list of specs for input_tensors (several inputs); one spec per tensor here.
    const OrderedJson* spec_json = &*it;
    if (it->is_array() && it->size() == 2) {
      auto spec = TwoStageFromQuarkJson(*it, StrCat(path, ".", f.key));
      if (!spec.ok()) return spec.status();
      *f.target = *std::move(spec);
      continue;
    }
    if (it->is_array()) {
      if (it->size() != 1) {
        return absl::InvalidArgumentError(StrCat(path, ".", f.key, ": a list of ", it->size(),
                                                       " specs is not supported (one spec per tensor)"));
      }
      spec_json = &(*it)[0];
    }
    auto spec = QuantSpecFromQuarkJson(*spec_json, StrCat(path, ".", f.key));
    if (!spec.ok()) return spec.status();
    *f.target = *std::move(spec);
  }
  return c;
}

OrderedJson ConfigToQuarkJson(const Config& c) {
  OrderedJson j;
  j["quant_method"] = "quark";
  j["global_quant_config"] = LayerConfigToQuarkJson(c.global_quant_config);
  OrderedJson types = OrderedJson::object();
  for (const auto& [type, layer] : c.layer_type_quant_config) types[type] = LayerConfigToQuarkJson(layer);
  j["layer_type_quant_config"] = std::move(types);
  j["layer_quant_config"] = PatternConfigsToJson(c.layer_quant_config);
  j["kv_cache_quant_config"] = PatternConfigsToJson(c.kv_cache_quant_config);
  j["exclude"] = c.exclude;
  if (c.algo_config.empty()) {
    j["algo_config"] = nullptr;
  } else {
    OrderedJson algos = OrderedJson::array();
    for (const auto& a : c.algo_config) algos.push_back(AlgoToJson(a));
    j["algo_config"] = std::move(algos);
  }
  j["quant_mode"] = std::string(Name(c.quant_mode));
  OrderedJson kv_group = OrderedJson::array();
  for (const auto& e : c.kv_cache_quant_config) kv_group.push_back(e.pattern);
  j["export"] = OrderedJson{{"kv_cache_group", std::move(kv_group)},
                            {"min_kv_scale", c.min_kv_scale},
                            {"pack_method", std::string(Name(c.pack_method))},
                            {"weight_format", "real_quantized"},
                            {"weight_merge_groups", nullptr}};
  j["version"] = "0.10";
  return j;
}

absl::StatusOr<Config> ConfigFromQuarkJson(const OrderedJson& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("quantization_config: expected an object");
  if (auto it = j.find("quant_method"); it != j.end() && it->is_string() && it->get<std::string>() != "quark") {
    return absl::InvalidArgumentError("quant_method: expected \"quark\", got " + it->dump());
  }
  Config c;
  if (auto it = j.find("global_quant_config"); it != j.end() && !it->is_null()) {
    auto global = LayerConfigFromQuarkJson(*it, "global_quant_config");
    if (!global.ok()) return global.status();
    c.global_quant_config = *std::move(global);
  }
  if (auto it = j.find("layer_type_quant_config"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return absl::InvalidArgumentError("layer_type_quant_config: expected an object");
    for (const auto& [type, value] : it->items()) {
      auto layer = LayerConfigFromQuarkJson(value, StrCat("layer_type_quant_config[", type, "]"));
      if (!layer.ok()) return layer.status();
      c.layer_type_quant_config[type] = *std::move(layer);
    }
  }
  QUARK_RETURN_IF_ERROR(ReadPatternConfigs(j, "layer_quant_config", c.layer_quant_config));
  QUARK_RETURN_IF_ERROR(ReadPatternConfigs(j, "kv_cache_quant_config", c.kv_cache_quant_config));
  QUARK_RETURN_IF_ERROR(ReadStringList(j, "exclude", "quantization_config", c.exclude));
  if (auto it = j.find("algo_config"); it != j.end() && !it->is_null()) {
    // Quark writes one algorithm object in older versions and a list in newer ones.
    const OrderedJson list = it->is_array() ? *it : OrderedJson::array({*it});
    for (size_t i = 0; i < list.size(); ++i) {
      auto algo = AlgoFromJson(list[i], StrCat("algo_config[", i, "]"));
      if (!algo.ok()) return algo.status();
      c.algo_config.push_back(*std::move(algo));
    }
  }
  QUARK_RETURN_IF_ERROR(ReadEnum(j, "quant_mode", "quantization_config", &ParseQuantMode, c.quant_mode));
  if (auto it = j.find("export"); it != j.end() && it->is_object()) {
    QUARK_RETURN_IF_ERROR(ReadEnum(*it, "pack_method", "export", &ParsePackMethod, c.pack_method));
    QUARK_RETURN_IF_ERROR(ReadNumber(*it, "min_kv_scale", "export", c.min_kv_scale));
    // An export that names a KV-cache group but no kv_cache_quant_config: rebuild it from layer_quant_config.
    std::vector<std::string> kv_group;
    QUARK_RETURN_IF_ERROR(ReadStringList(*it, "kv_cache_group", "export", kv_group));
    if (c.kv_cache_quant_config.empty()) {
      for (const auto& pattern : kv_group) {
        for (const auto& entry : c.layer_quant_config) {
          if (entry.pattern == pattern) c.kv_cache_quant_config.push_back(entry);
        }
      }
    }
  }
  return c;
}

}  // namespace quark
