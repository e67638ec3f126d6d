#include "core/export/hf_quark_gpt_oss.h"

#include <set>

#include "core/base/strings.h"
#include "core/checkpoint/gpt_oss_config.h"
#include "core/checkpoint/gpt_oss_layout.h"
#include "core/checkpoint/model_layout.h"
#include "core/checkpoint/model_modules.h"
#include "core/export/hf_quark_checker.h"

namespace quark::exporter {
namespace {

using OrderedJson = nlohmann::ordered_json;

std::string StrOf(const OrderedJson& spec, const char* key) {
  return spec.is_object() && spec.contains(key) && spec[key].is_string() ? spec[key].get<std::string>() : "";
}

// A spec list of one element is that element (vLLM unwraps it).
OrderedJson Unwrapped(const OrderedJson& spec) { return spec.is_array() && spec.size() == 1 ? spec[0] : spec; }

// vLLM's QuarkMoEMethod.get_moe_method: _is_fp8_w8a8 (fp8_e4m3 weight and input, per_tensor or per_channel), the
// OCP MX weights (_is_mx_fp4 / _is_ocp_mx: fp4 or fp6 per_group of 32 with e8m0 scales). W4A8 (two-element weight
// lists) dispatches on ROCm only and is left to VllmQuarkLoadWarnings.
bool VllmHasMoeMethod(const OrderedJson& layer) {
  const OrderedJson weight = Unwrapped(layer.value("weight", OrderedJson()));
  const OrderedJson input = Unwrapped(layer.value("input_tensors", OrderedJson()));
  if (layer.value("weight", OrderedJson()).is_array() && layer["weight"].size() == 2) return true;
  const std::string w = StrOf(weight, "dtype");
  if (w == "fp8_e4m3") {
    const std::string scheme = StrOf(weight, "qscheme");
    return StrOf(input, "dtype") == "fp8_e4m3" && (scheme == "per_tensor" || scheme == "per_channel");
  }
  const bool mx_element = w == "fp4" || w == "fp6_e2m3" || w == "fp6_e3m2";
  return mx_element && StrOf(weight, "qscheme") == "per_group" && weight.value("group_size", OrderedJson()) == 32;
}

}  // namespace

std::optional<std::vector<int64_t>> FusedExpertLinearShape(const checkpoint::ModelConfig& model,
                                                           const checkpoint::CheckpointReader& reader,
                                                           const std::string& module) {
  if (model.family != checkpoint::ArchFamily::kGptOss) return std::nullopt;
  const std::string weight = module + ".weight";
  if (!checkpoint::ResolveTensorName(reader, weight).empty() || !checkpoint::GptOssExpertSliceOf(weight)) {
    return std::nullopt;
  }
  const std::string relative = module.substr(module.rfind(".mlp.experts.") + 1);  // "mlp.experts.5.gate_up_proj"
  const std::string kind = relative.substr(relative.rfind('.') + 1);
  for (const checkpoint::LinearSpec& l : checkpoint::GptOssLayerLinears(*model.gpt_oss)) {
    if (l.routed && l.relative_name == "mlp.experts.0." + kind) return std::vector<int64_t>{l.out_features, l.in_features};
  }
  return std::nullopt;
}

bool ReplacedByExpertLinears(const checkpoint::ModelConfig& model, const std::string& name) {
  return model.family == checkpoint::ArchFamily::kGptOss && checkpoint::IsGptOssFusedExpertTensor(name);
}

std::vector<std::string> GptOssVllmLoadWarnings(const OrderedJson& qc, const checkpoint::ModelConfig& model) {
  std::vector<std::string> out;
  if (model.family != checkpoint::ArchFamily::kGptOss) return out;
  std::set<std::string> seen;
  for (int64_t i = 0; i < model.num_hidden_layers; ++i) {
    const std::string expert = StrCat(checkpoint::LayerPrefix(model, i), "mlp.experts.0.gate_up_proj");
    if (VllmExcluded(qc, expert)) continue;
    const OrderedJson layer = VllmLayerConfig(qc, expert);
    if (!layer.is_object() || VllmHasMoeMethod(layer) || !seen.insert(layer.dump()).second) continue;
    out.push_back(StrCat(expert, ": vLLM's QuarkMoEMethod has no method for this expert scheme (fp8 W8A8 and MXFP4 ",
                         "experts load; others raise \"Unsupported FusedMoe scheme\"): the export reads back here and in ",
                         "transformers, not in vLLM"));
  }
  return out;
}

}  // namespace quark::exporter
