#include "core/config/autoround_json.h"

#include <cmath>
#include <set>

#include "core/base/status_macros.h"
#include "core/base/strings.h"

namespace quark {
namespace {

using OrderedJson = nlohmann::ordered_json;

// Reads `key` when it is present and not null (auto-round's None: the default stays); `take` checks the JSON value
// and converts it, false when it is not `expected`.
template <typename T, typename Take>
absl::Status ReadField(const OrderedJson& j, const char* key, const std::string& path, const char* expected, Take take,
                       T& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  if (!take(*it, out)) return absl::InvalidArgumentError(StrCat(path, ".", key, ": expected ", expected, ", got ", it->dump()));
  return absl::OkStatus();
}

bool TakeInt(const OrderedJson& v, int& out) {
  if (!v.is_number_integer() || v.get<int64_t>() < -(int64_t{1} << 30) || v.get<int64_t>() > (int64_t{1} << 30)) return false;
  out = static_cast<int>(v.get<int64_t>());
  return true;
}

bool TakeRate(const OrderedJson& v, std::optional<float>& out) {
  if (!v.is_number() || !std::isfinite(v.get<double>())) return false;
  out = static_cast<float>(v.get<double>());
  return true;
}

bool TakeFlag(const OrderedJson& v, bool& out) {
  if (!v.is_boolean()) return false;
  out = v.get<bool>();
  return true;
}

bool TakeString(const OrderedJson& v, std::string& out) {
  if (!v.is_string()) return false;
  out = v.get<std::string>();
  return true;
}

}  // namespace

absl::StatusOr<AutoRoundAlgo> AutoRoundFromJson(const OrderedJson& j, const std::string& path) {
  static const std::set<std::string> kKeys = {"name",       "iters",    "lr",
                                              "minmax_lr",  "batch_size", "gradient_accumulate_steps",
                                              "enable_minmax_tuning", "not_use_best_mse", "seed",
                                              "model_decoder_layers"};
  for (const auto& [key, value] : j.items()) {
    if (kKeys.count(key) == 0) {
      return absl::InvalidArgumentError(StrCat(path, ".", key, ": unknown autoround parameter (one of iters, lr, ",
                                               "minmax_lr, batch_size, gradient_accumulate_steps, enable_minmax_tuning, ",
                                               "not_use_best_mse, seed, model_decoder_layers)"));
    }
  }
  AutoRoundAlgo a;
  const char* kInt = "an integer";
  QUARK_RETURN_IF_ERROR(ReadField(j, "iters", path, kInt, TakeInt, a.iters));
  QUARK_RETURN_IF_ERROR(ReadField(j, "lr", path, "a number or null", TakeRate, a.lr));
  QUARK_RETURN_IF_ERROR(ReadField(j, "minmax_lr", path, "a number or null", TakeRate, a.minmax_lr));
  QUARK_RETURN_IF_ERROR(ReadField(j, "batch_size", path, kInt, TakeInt, a.batch_size));
  QUARK_RETURN_IF_ERROR(ReadField(j, "gradient_accumulate_steps", path, kInt, TakeInt, a.gradient_accumulate_steps));
  QUARK_RETURN_IF_ERROR(ReadField(j, "enable_minmax_tuning", path, "true or false", TakeFlag, a.enable_minmax_tuning));
  QUARK_RETURN_IF_ERROR(ReadField(j, "not_use_best_mse", path, "true or false", TakeFlag, a.not_use_best_mse));
  QUARK_RETURN_IF_ERROR(ReadField(j, "seed", path, kInt, TakeInt, a.seed));
  QUARK_RETURN_IF_ERROR(ReadField(j, "model_decoder_layers", path, "a string", TakeString, a.model_decoder_layers));
  QUARK_RETURN_IF_ERROR(CheckAutoRoundRanges(a, path));
  return a;
}

void AutoRoundToJson(const AutoRoundAlgo& a, OrderedJson& j) {
  j["iters"] = a.iters;
  j["lr"] = a.lr ? OrderedJson(*a.lr) : OrderedJson(nullptr);
  j["minmax_lr"] = a.minmax_lr ? OrderedJson(*a.minmax_lr) : OrderedJson(nullptr);
  j["batch_size"] = a.batch_size;
  j["gradient_accumulate_steps"] = a.gradient_accumulate_steps;
  j["enable_minmax_tuning"] = a.enable_minmax_tuning;
  j["not_use_best_mse"] = a.not_use_best_mse;
  j["seed"] = a.seed;
  j["model_decoder_layers"] = a.model_decoder_layers;
}

absl::Status CheckAutoRoundRanges(const AutoRoundAlgo& a, const std::string& path) {
  if (a.iters <= 0) return absl::InvalidArgumentError(StrCat(path, ".iters: must be positive, got ", a.iters));
  // A signed step moves V by lr; V lives in [-0.5, 0.5] and the clipping factors in [0.5, 1].
  for (const auto& [name, rate] : {std::pair{"lr", a.lr}, std::pair{"minmax_lr", a.minmax_lr}}) {
    if (rate && !(*rate > 0.0f && *rate <= 1.0f)) {
      return absl::InvalidArgumentError(StrCat(path, ".", name, ": must be in (0, 1] (or null: 1 / iters), got ", *rate));
    }
  }
  if (a.batch_size <= 0) {
    return absl::InvalidArgumentError(StrCat(path, ".batch_size: must be positive, got ", a.batch_size));
  }
  if (a.gradient_accumulate_steps <= 0) {
    return absl::InvalidArgumentError(
        StrCat(path, ".gradient_accumulate_steps: must be positive, got ", a.gradient_accumulate_steps));
  }
  return absl::OkStatus();
}

std::string AutoRoundWeightProblem(const std::optional<QuantSpec>& weight) {
  if (!weight) return "a quantized weight spec, got none";
  const QuantSpec& w = *weight;
  if (!IsIntegerType(w.dtype) || w.IsMx() || w.IsNvfp4()) {
    return StrCat("an integer weight grid (int2..int8, uint4, uint8), got ", Name(w.dtype),
                  w.IsMx() ? " with MX scales" : w.IsNvfp4() ? " with NVFP4 scales" : "");
  }
  if (w.is_dynamic) return "a static weight spec, got a dynamic one";
  if (w.qscheme != QScheme::kPerGroup && w.qscheme != QScheme::kPerChannel) {
    return StrCat("per_group or per_channel weight scales, got ", Name(w.qscheme));
  }
  if (w.qscheme == QScheme::kPerGroup && (!w.group_size || (*w.group_size <= 0 && *w.group_size != -1))) {
    return StrCat("a positive weight group_size (or -1), got ", w.group_size ? StrCat(*w.group_size) : "none");
  }
  if (w.scale_type == ScaleType::kPof2) return "float weight scales, got power-of-two ones";
  if (!w.symmetric && w.zero_point_type != ZeroPointType::kInt32) return "an int32 zero point, got a float one";
  if (w.round_method != RoundMethod::kHalfEven) return "half_even rounding of the weight";
  return "";
}

}  // namespace quark
