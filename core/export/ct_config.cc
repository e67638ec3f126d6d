#include "core/export/ct_config.h"

#include <algorithm>
#include <set>

#include "core/base/strings.h"
#include "core/config/e8m0_tiles.h"  // #30
#include "core/config/online_rotation.h"
#include "core/export/ct_targets.h"
#include "core/export/ct_transform.h"

namespace quark::exporter {
namespace {

using Json = nlohmann::json;

absl::Status Refuse(const std::string& path, const std::string& why) {
  return absl::InvalidArgumentError(StrCat(path, ": ", why, " (compressed-tensors cannot express it)"));
}

// strategy of a spec: tensor / channel / group / block / token / tensor_group.
absl::StatusOr<std::string> StrategyOf(const QuantSpec& s, bool is_weight, const std::string& path) {
  if (s.IsNvfp4()) return std::string("tensor_group");
  switch (s.qscheme) {
    case QScheme::kPerTensor: return std::string("tensor");
    case QScheme::kPerChannel:
      if (!is_weight) {
        if (s.is_dynamic) return std::string("token");
        return Refuse(path + ".qscheme", "a static per_channel activation");
      }
      if (s.ch_axis.value_or(0) != 0) return Refuse(path + ".ch_axis", "per_channel weights on an axis other than 0");
      return std::string("channel");
    case QScheme::kPerGroup:
      if (s.ch_axis && *s.ch_axis != -1 && *s.ch_axis != 1) {
        return Refuse(path + ".ch_axis", "groups along an axis other than the input features");
      }
      return std::string(s.group_size.value_or(-1) == -1 ? "channel" : "group");
    case QScheme::kPerBlock: return std::string("block");
  }
  return Refuse(path + ".qscheme", "an unknown granularity");
}

}  // namespace

absl::StatusOr<Json> CtQuantizationArgs(const QuantSpec& s, bool is_weight, const std::string& path) {
  const DType el = s.ElementType();
  if (IsCastType(s.dtype)) return Refuse(path + ".dtype", StrCat(Name(s.dtype), " is a cast, not a quantization"));
  if (IsE8m0Tiles(s)) {  // #30: vLLM's compressed_tensors fp8 block scheme allocates float32 block scales
    return absl::InvalidArgumentError(StrCat(path, ".scale_format: E8M0 tile scales (per_block, e8m0) are not written ",
                                             "as compressed-tensors: vLLM's float-quantized block scheme loads float32 ",
                                             "block scales and its MX formats are groups of 32; export hf_quark"));
  }
  if (el == DType::kFp8E5M2 || el == DType::kFp6E3M2 || el == DType::kFp6E2M3) {
    return Refuse(path + ".dtype", StrCat(Name(el), " (its float types are fp8_e4m3 and fp4_e2m1)"));
  }
  if (IsUnsigned(el) && s.symmetric) {
    return Refuse(path + ".symmetric", StrCat("true with ", Name(el), " (unsigned symmetric clips negatives)"));
  }
  if (s.IsMx() && el != DType::kFp4 && el != DType::kFp8E4M3) return Refuse(path + ".dtype", StrCat("MX ", Name(el)));
  if (s.round_method != RoundMethod::kHalfEven) return Refuse(path + ".round_method", "rounding other than half_even");
  if (s.scale_type == ScaleType::kPof2) return Refuse(path + ".scale_type", "pof2 scales");
  if (s.zero_point_type == ZeroPointType::kFloat32) return Refuse(path + ".zero_point_type", "float zero points");
  if (s.observer == ObserverKind::kPercentile || s.observer == ObserverKind::kMse) {
    return Refuse(path + ".observer", StrCat(Name(s.observer), " (llm-compressor's observers are min-max)"));
  }
  if (s.IsMx() && s.scale_calculation_mode != ScaleCalculationMode::kEven) {
    return Refuse(path + ".scale_calculation_mode", StrCat(Name(s.scale_calculation_mode), " (E8M0 scales round up)"));
  }
  auto strategy = StrategyOf(s, is_weight, path);
  if (!strategy.ok()) return strategy.status();
  Json a;
  a["num_bits"] = IsIntegerType(el) ? IntegerBits(el) : (el == DType::kFp4 ? 4 : 8);
  a["type"] = IsIntegerType(el) ? "int" : "float";
  a["symmetric"] = s.symmetric;
  a["strategy"] = *strategy;
  a["group_size"] = nullptr;
  if (*strategy == "group" || *strategy == "tensor_group") a["group_size"] = s.IsMx() ? 32 : *s.group_size;
  a["block_structure"] = s.block_size.empty() ? Json(nullptr) : Json(s.block_size);
  a["dynamic"] = s.IsNvfp4() && s.is_dynamic ? Json("local") : Json(s.is_dynamic);
  a["actorder"] = nullptr;
  a["observer"] = s.is_dynamic && !s.IsNvfp4() ? Json(nullptr)
                  : s.observer == ObserverKind::kImatrixMse ? Json("imatrix_mse")  // #35: llm-compressor's own name
                                                             : Json(s.IsNvfp4() && !is_weight ? "static_minmax" : "minmax");
  a["observer_kwargs"] = Json::object();
  // As the library serialises QuantizationArgs (checked by ct_peer_test against its model_dump): scale_dtype always
  // (null unless the format fixes it), zp_dtype null for symmetric schemes (its field_serializer), else the dtype.
  a["scale_dtype"] = s.IsNvfp4() ? Json("torch.float8_e4m3fn") : s.IsMx() ? Json("torch.uint8") : Json(nullptr);
  a["zp_dtype"] = s.symmetric ? Json(nullptr) : Json("torch.int8");
  return a;
}

absl::StatusOr<std::string> CtFormatOf(const LayerQuantConfig& c, const std::string& path) {
  if (!c.weight) return Refuse(path + ".weight", "activation-only quantization (no weight spec)");
  const QuantSpec& w = *c.weight;
  const DType el = w.ElementType();
  if (w.IsProgressive()) {  // #30 W4A8: QuantizationArgs hold one grid; its W4AFP8 is int4 groups of raw weights
    return Refuse(path + ".weight.fp8_first_stage",
                  "W4A8's fp8-then-int4 weight (QuantizationArgs quantize a weight once; its W4AFP8 preset is int4 "
                  "groups of the float weight with fp8 activations)");
  }
  if (w.IsMx()) return std::string(el == DType::kFp4 ? "mxfp4-pack-quantized" : "mxfp8-quantized");
  if (w.IsNvfp4()) return std::string("nvfp4-pack-quantized");
  if (IsIntegerType(el)) return std::string(c.input_tensors ? "int-quantized" : "pack-quantized");
  if (c.input_tensors && IsIntegerType(c.input_tensors->ElementType())) {
    return Refuse(path + ".input_tensors", "int activations with float weights");
  }
  return std::string("float-quantized");
}

bool CtFormatIsWritten(std::string_view format) {
  for (std::string_view written : {"pack-quantized", "int-quantized", "float-quantized", "nvfp4-pack-quantized",
                                   "mxfp4-pack-quantized", "mxfp8-quantized"}) {
    if (format == written) return true;
  }
  return false;
}

absl::Status CheckCtLayerConfig(const LayerQuantConfig& c, const std::string& path) {
  if (c.bias) return Refuse(path + ".bias", "a quantized bias");
  auto format = CtFormatOf(c, path);
  if (!format.ok()) return format.status();
  if (!CtFormatIsWritten(*format)) {
    return absl::UnimplementedError(StrCat(path, ".weight: the ", *format, " format is not written yet"));
  }
  if (auto w = CtQuantizationArgs(*c.weight, true, path + ".weight"); !w.ok()) return w.status();
  if (c.input_tensors) {
    if (auto in = CtQuantizationArgs(*c.input_tensors, false, path + ".input_tensors"); !in.ok()) return in.status();
  }
  return absl::OkStatus();
}

absl::StatusOr<Json> CompressedTensorsConfig(const Config& config, const LayerPlan& plan) {
  if (absl::Status s = CheckCtFusedShards(config, plan); !s.ok()) return s;
  // Distinct layer configs (KV output specs aside) in plan order, with their modules.
  std::vector<std::pair<LayerQuantConfig, std::vector<std::string>>> groups;
  std::vector<std::string> ignore, linears;
  for (const LayerAssignment& a : plan.layers) {
    if (a.module_type != "Linear") continue;
    linears.push_back(a.module);
    if (a.source == ConfigSource::kExcluded || a.config.Empty()) {
      ignore.push_back(a.module);
      continue;
    }
    LayerQuantConfig c = a.config;
    const std::string path = a.SourceLabel();
    if (c.bias) return Refuse(path + ".bias", "a quantized bias");
    if (c.output_tensors && !KvCacheSpecFor(config, a.module)) return Refuse(path + ".output_tensors", "output quantization");
    c.output_tensors.reset();
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == c; });
    if (it == groups.end()) {
      groups.push_back({c, {}});
      it = groups.end() - 1;
    }
    it->second.push_back(a.module);
  }
  std::vector<std::vector<std::string>> modules_of;
  for (const auto& g : groups) modules_of.push_back(g.second);
  const std::vector<std::vector<std::string>> targets = CtGroupTargets(modules_of, linears);
  Json config_groups = Json::object();
  std::set<std::string> formats;
  for (size_t i = 0; i < groups.size(); ++i) {
    const auto& [c, modules] = groups[i];
    const std::string path = plan.Find(modules.front())->SourceLabel();
    auto format = CtFormatOf(c, path);
    if (!format.ok()) return format.status();
    Json g;
    g["targets"] = groups.size() == 1 ? Json::array({"Linear"}) : Json(targets[i]);
    auto w = CtQuantizationArgs(*c.weight, true, path + ".weight");
    if (!w.ok()) return w.status();
    g["weights"] = *w;
    g["input_activations"] = nullptr;
    if (c.input_tensors) {
      auto in = CtQuantizationArgs(*c.input_tensors, false, path + ".input_tensors");
      if (!in.ok()) return in.status();
      g["input_activations"] = *in;
    }
    g["output_activations"] = nullptr;
    g["format"] = *format;
    formats.insert(*format);
    config_groups[StrCat("group_", i)] = std::move(g);
  }
  Json qc;
  qc["config_groups"] = std::move(config_groups);
  qc["format"] = formats.size() == 1 ? Json(*formats.begin()) : Json(formats.empty() ? "dense" : "mixed-precision");
  qc["global_compression_ratio"] = nullptr;
  qc["ignore"] = ignore;
  qc["kv_cache_scheme"] = nullptr;
  if (!config.kv_cache_quant_config.empty()) {
    const auto& kv = config.kv_cache_quant_config.front().config.output_tensors;
    if (kv && kv->dtype != DType::kFp8E4M3) {
      return Refuse("kv_cache_dtype", StrCat(Name(kv->dtype), " KV cache (vLLM reads an fp8 kv_cache_scheme)"));
    }
    qc["kv_cache_scheme"] = Json{{"num_bits", 8}, {"type", "float"}, {"strategy", "tensor"}, {"dynamic", false},
                                 {"symmetric", true}, {"group_size", nullptr}, {"block_structure", nullptr},
                                 {"actorder", nullptr}, {"scale_dtype", nullptr}, {"zp_dtype", nullptr},
                                 {"observer", "minmax"}, {"observer_kwargs", Json::object()}};
  }
  qc["quant_method"] = "compressed-tensors";
  qc["quantization_status"] = "compressed";
  qc["sparsity_config"] = Json::object();
  // #35 item 4: the rotation's r4 travels as compressed-tensors' online input Hadamard on down_proj (ct_transform.h).
  qc["transform_config"] = HasOnlineR4(config) ? CtR4TransformConfig() : Json::object();
  qc["version"] = kCompressedTensorsVersion;
  return qc;
}

}  // namespace quark::exporter
