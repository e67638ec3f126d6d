// Quark's two-element tensor-spec lists (formats-2026.md 1.6, 1.7): NVFP4's ScaleQuantSpec and W4A8's ProgressiveSpec,
// read into and written from the engine's one QuantSpec (scale_format e4m3 / fp8_first_stage).
#include "core/config/quark_json_two_stage.h"

#include "core/base/strings.h"
#include "core/config/json_read.h"
#include "core/config/quark_json.h"

namespace quark {
namespace {

using OrderedJson = nlohmann::ordered_json;

// The first element of a ProgressiveSpec list: the fp8_e4m3 per-tensor stage, static, min_max, float32 scales.
absl::StatusOr<QuantSpec> ProgressiveFromQuarkJson(const OrderedJson& list, const std::string& path) {
  auto first = QuantSpecFromQuarkJson(list[0], path + "[0]");
  if (!first.ok()) return first.status();
  const char* bad = nullptr;
  if (first->qscheme != QScheme::kPerTensor) bad = "qscheme: the fp8 first stage is per_tensor";
  if (first->is_dynamic) bad = "is_dynamic: the fp8 first stage is static";
  if (first->observer != ObserverKind::kMinMax) bad = "observer_cls: the fp8 first stage uses min_max";
  if (first->scale_type != ScaleType::kFloat32) bad = "scale_type: the fp8 first stage has float32 scales";
  if (bad != nullptr) {
    return absl::InvalidArgumentError(StrCat(path, "[0].", bad, " (Quark's int4_fp8 ProgressiveSpec), got ",
                                             list[0].dump()));
  }
  auto second = QuantSpecFromQuarkJson(list[1], path + "[1]");
  if (!second.ok()) return second.status();
  second->fp8_first_stage = true;
  return second;
}

}  // namespace

// NVFP4 as Quark writes it (formats-2026.md 1.6): a two-element list, the fp4 groups of 16 and the fp8 per-tensor
// second stage that quantizes their scales (`is_scale_quant`), each with Quark's full key set.
nlohmann::ordered_json Nvfp4ToQuarkJson(const QuantSpec& s) {
  OrderedJson first{{"dtype", "fp4"},          {"is_dynamic", s.is_dynamic},     {"qscheme", "per_group"},
                    {"ch_axis", -1},           {"group_size", 16},               {"symmetric", nullptr},
                    {"round_method", "half_even"}, {"scale_type", "float32"},    {"scale_format", "float32"},
                    {"scale_calculation_mode", nullptr}, {"mx_element_dtype", nullptr},
                    {"observer_cls", "PerBlockMXObserver"}, {"is_scale_quant", false}, {"block_size", nullptr}};
  OrderedJson second{{"dtype", "fp8_e4m3"},    {"is_dynamic", false},            {"qscheme", "per_tensor"},
                     {"ch_axis", nullptr},     {"group_size", nullptr},          {"symmetric", nullptr},
                     {"round_method", "half_even"}, {"scale_type", "float32"},   {"scale_format", nullptr},
                     {"scale_calculation_mode", nullptr}, {"mx_element_dtype", nullptr},
                     {"observer_cls", "PerTensorMinMaxObserver"}, {"is_scale_quant", true}, {"block_size", nullptr}};
  return OrderedJson::array({std::move(first), std::move(second)});
}

// #30 W4A8: Quark's ProgressiveSpec as it writes it (formats-2026.md 1.7, 1.8): [FP8E4M3PerTensorSpec (min_max,
// float32, static), Int4PerChannelSpec], each with the full key set and is_scale_quant false.
nlohmann::ordered_json ProgressiveToQuarkJson(const QuantSpec& s) {
  QuantSpec first;
  first.dtype = DType::kFp8E4M3;
  first.qscheme = QScheme::kPerTensor;
  first.scale_type = ScaleType::kFloat32;
  QuantSpec second = s;
  second.fp8_first_stage = false;
  OrderedJson a = QuantSpecToQuarkJson(first);
  OrderedJson b = QuantSpecToQuarkJson(second);
  a["is_scale_quant"] = false;
  b["is_scale_quant"] = false;
  return OrderedJson::array({std::move(a), std::move(b)});
}

// The two-element list of a tensor: NVFP4 ([fp4 per_group 16, fp8_e4m3 per_tensor scale quantizer]) or W4A8's
// ProgressiveSpec ([fp8_e4m3 per_tensor, int4 per_channel]).
absl::StatusOr<QuantSpec> TwoStageFromQuarkJson(const nlohmann::ordered_json& list, const std::string& path) {
  const OrderedJson& a = list[0];
  const OrderedJson& b = list[1];
  if (a.is_object() && b.is_object() && JsonStringIs(a, "dtype", "fp8_e4m3") && !JsonStringIs(b, "dtype", "fp8_e4m3")) {
    return ProgressiveFromQuarkJson(list, path);
  }
  const bool nvfp4 = a.is_object() && b.is_object() && JsonStringIs(a, "dtype", "fp4") &&
                     JsonStringIs(a, "qscheme", "per_group") && a.contains("group_size") && a["group_size"] == 16 &&
                     JsonStringIs(b, "dtype", "fp8_e4m3") && JsonStringIs(b, "qscheme", "per_tensor");
  if (!nvfp4) {
    return absl::InvalidArgumentError(StrCat(path, ": a two-element spec list is read as NVFP4 ([{dtype fp4, ",
                                             "qscheme per_group, group_size 16}, {dtype fp8_e4m3, qscheme ",
                                             "per_tensor}]) or W4A8 ([{dtype fp8_e4m3, qscheme per_tensor}, ",
                                             "{dtype int4, qscheme per_channel}]), got ", list.dump()));
  }
  if (auto it = b.find("is_dynamic"); it != b.end() && it->is_boolean() && it->get<bool>()) {
    return absl::InvalidArgumentError(path + "[1].is_dynamic: the NVFP4 global scale is static");
  }
  OrderedJson first = a;
  first.erase("scale_format");  // Quark's first stage says "float32": its scales are what the second stage quantizes
  first.erase("observer_cls");
  first.erase("is_scale_quant");
  first.erase("block_size");
  auto spec = QuantSpecFromQuarkJson(first, path + "[0]");
  if (!spec.ok()) return spec.status();
  spec->scale_format = ScaleFormat::kE4M3;
  spec->scale_type = ScaleType::kFloat32;
  spec->observer = ObserverKind::kMinMax;
  spec->symmetric = true;
  return spec;
}

}  // namespace quark
