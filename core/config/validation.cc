#include "core/config/validation.h"

#include <cmath>
#include <set>

#include "core/base/strings.h"
#include "core/config/autoround_json.h"  // #35 AutoRound
#include "core/config/e8m0_tiles.h"  // #30 E8M0 tiles
#include "core/config/rotation_json.h"  // #35 learned rotation
#include "core/base/glob.h"

namespace quark {
namespace {

enum class TensorRole { kWeight, kBias, kActivation };

// Collects issues; `Error` and `Warn` take the field path and the message.
class Issues {
 public:
  void Error(std::string path, std::string message) {
    issues_.push_back({ValidationIssue::Severity::kError, std::move(path), std::move(message)});
  }
  void Warn(std::string path, std::string message) {
    issues_.push_back({ValidationIssue::Severity::kWarning, std::move(path), std::move(message)});
  }
  std::vector<ValidationIssue> Take() { return std::move(issues_); }

 private:
  std::vector<ValidationIssue> issues_;
};

bool IsMxElementType(DType d) {
  return d == DType::kFp8E4M3 || d == DType::kFp8E5M2 || d == DType::kFp6E3M2 || d == DType::kFp6E2M3 ||
         d == DType::kFp4 || d == DType::kInt8;
}

void CheckMx(const QuantSpec& s, const std::string& path, Issues& out) {
  if (s.dtype == DType::kMx && !s.mx_element_dtype) {
    out.Error(path + ".mx_element_dtype", "required when dtype is mx");
    return;
  }
  const DType element = s.ElementType();
  if (!IsMxElementType(element)) {
    out.Error(path + ".dtype", StrCat("OCP MX (scale_format e8m0) needs an element type of fp8_e4m3, fp8_e5m2, "
                                            "fp6_e3m2, fp6_e2m3, fp4 or int8, got ", Name(element)));
  }
  if (s.group_size.value_or(32) != 32) {
    out.Error(path + ".group_size", StrCat("OCP MX needs group_size 32, got ", *s.group_size));
  }
  if (s.dtype != DType::kMx && s.qscheme != QScheme::kPerGroup) {
    out.Error(path + ".qscheme", StrCat("OCP MX is per_group (blocks of 32), got ", Name(s.qscheme)));
  }
  if (!s.symmetric) out.Error(path + ".symmetric", "OCP MX is symmetric only");
}

void CheckNvfp4(const QuantSpec& s, const std::string& path, Issues& out) {
  if (s.dtype != DType::kFp4) {
    out.Error(path + ".dtype", StrCat("NVFP4 (scale_format e4m3) needs fp4 elements, got ", Name(s.dtype)));
  }
  if (s.qscheme != QScheme::kPerGroup) {
    out.Error(path + ".qscheme", StrCat("NVFP4 is per_group (groups of 16), got ", Name(s.qscheme)));
  }
  if (s.group_size.value_or(16) != 16) {
    out.Error(path + ".group_size", StrCat("NVFP4 needs group_size 16, got ", *s.group_size));
  }
  if (s.ch_axis && *s.ch_axis != -1 && *s.ch_axis != 1) {
    out.Error(path + ".ch_axis", StrCat("NVFP4 groups run along the last axis (-1), got ", *s.ch_axis));
  }
  if (s.observer != ObserverKind::kMinMax) {
    out.Error(path + ".observer", StrCat("NVFP4 uses min_max (block and global amax), got ", Name(s.observer)));
  }
}

// #30 W4A8: Quark's int4_fp8 ProgressiveSpec, the only two-stage chain the numerics run: an fp8_e4m3 per-tensor first
// stage, then int4 per_channel symmetric over output channels, on weights (formats-2026.md 1.7, 1.8).
void CheckProgressive(const QuantSpec& s, TensorRole role, const std::string& path, Issues& out) {
  const std::string f = path + ".fp8_first_stage";
  if (role != TensorRole::kWeight) out.Error(f, "an fp8 first stage (W4A8 ProgressiveSpec) is for weights only");
  if (s.dtype != DType::kInt4) {
    out.Error(path + ".dtype", StrCat("after an fp8 first stage (W4A8) the second stage is int4, got ", Name(s.dtype)));
  }
  if (s.qscheme != QScheme::kPerChannel || s.ch_axis.value_or(0) != 0) {
    out.Error(path + ".qscheme",
              StrCat("after an fp8 first stage (W4A8) the int4 stage is per_channel with ch_axis 0, got ",
                     Name(s.qscheme), s.ch_axis ? StrCat(" ch_axis ", *s.ch_axis) : std::string()));
  }
  if (!s.symmetric) out.Error(path + ".symmetric", "the W4A8 int4 stage is symmetric (vLLM's _is_fp8_w4a8)");
  if (s.observer != ObserverKind::kMinMax) {
    out.Error(path + ".observer", StrCat("the W4A8 int4 stage uses min_max, got ", Name(s.observer)));
  }
  if (s.IsMx() || s.IsNvfp4()) out.Error(path + ".scale_format", "an fp8 first stage takes plain float scales");
}

void CheckGranularity(const QuantSpec& s, const std::string& path, Issues& out) {
  if (s.qscheme == QScheme::kPerGroup) {
    if (!s.group_size) {
      out.Error(path + ".group_size", "required when qscheme is per_group");
    } else if (*s.group_size == 0 || *s.group_size < -1) {
      out.Error(path + ".group_size", StrCat("must be positive or -1 (the whole row), got ", *s.group_size));
    }
  } else if (s.group_size && !s.IsMx()) {
    out.Warn(path + ".group_size", StrCat("ignored: only per_group uses a group size (qscheme is ",
                                                Name(s.qscheme), ")"));
  }
  if (s.qscheme == QScheme::kPerBlock &&
      (s.block_size.size() != 2 || s.block_size[0] <= 0 || s.block_size[1] <= 0)) {
    out.Error(path + ".block_size", "per_block needs block_size [rows, cols] of two positive integers");
  } else if (s.qscheme != QScheme::kPerBlock && !s.block_size.empty()) {
    out.Error(path + ".block_size", StrCat("only per_block uses a block size (qscheme is ", Name(s.qscheme), ")"));
  }
  if (s.ch_axis && (*s.ch_axis < -4 || *s.ch_axis > 3)) {
    out.Error(path + ".ch_axis", StrCat("out of range: ", *s.ch_axis));
  }
}

// #35 imatrix_mse: llm-compressor's search over a weight's integer grid, per output channel or per input group.
void CheckImatrixMse(const QuantSpec& s, TensorRole role, const std::string& path, Issues& out) {
  if (role != TensorRole::kWeight) {
    out.Error(path + ".observer", "imatrix_mse observes weights only (it weights a weight's input columns by the "
                                  "importance of their activations)");
    return;
  }
  if (!IsIntegerType(s.dtype) || s.IsMx() || s.IsNvfp4()) {
    out.Error(path + ".observer", StrCat("imatrix_mse searches integer grids (int2 ... int8, uint ...), dtype is ",
                                         Name(s.ElementType()), s.IsMx() ? " (MX)" : ""));
  }
  const int channel_axis = s.ch_axis.value_or(0), group_axis = s.ch_axis.value_or(-1);
  const bool channel = s.qscheme == QScheme::kPerChannel && (channel_axis == 0 || channel_axis == -2);
  const bool group = s.qscheme == QScheme::kPerGroup && (group_axis == 1 || group_axis == -1) &&
                     s.group_size.value_or(0) > 0;
  if (!channel && !group) {
    out.Error(path + ".observer", StrCat("imatrix_mse needs per_channel weights (ch_axis 0) or per_group along the "
                                         "input features (ch_axis 1 / -1, group_size > 0), got ", Name(s.qscheme),
                                         s.ch_axis ? StrCat(" ch_axis ", *s.ch_axis) : std::string()));
  }
}

void CheckObserver(const QuantSpec& s, TensorRole role, const std::string& path, Issues& out) {
  if (s.observer == ObserverKind::kImatrixMse) CheckImatrixMse(s, role, path, out);
  const bool histogram = s.observer == ObserverKind::kPercentile || s.observer == ObserverKind::kMse;
  if (histogram && s.qscheme != QScheme::kPerTensor) {
    out.Error(path + ".observer", StrCat(Name(s.observer), " supports per_tensor only (qscheme is ",
                                               Name(s.qscheme), ")"));
  }
  if (histogram && s.is_dynamic) {
    out.Error(path + ".observer", StrCat(Name(s.observer), " is a calibration observer; a dynamic spec has none"));
  }
  if (s.observer == ObserverKind::kMxBlock && !s.IsMx()) {
    out.Error(path + ".observer", "mx_block needs an OCP MX spec (scale_format e8m0 or dtype mx)");
  }
  if (s.observer == ObserverKind::kPercentile && !(s.percentile > 0.0 && s.percentile <= 100.0)) {
    out.Error(path + ".percentile", StrCat("must be in (0, 100], got ", s.percentile));
  }
}

void CheckSpec(const QuantSpec& s, TensorRole role, const std::string& path, Issues& out) {
  if (IsE8m0Tiles(s)) {  // #30: checked with the layer's input in CheckLayerConfig
    if (role != TensorRole::kWeight) out.Error(path + ".qscheme", "E8M0 tiles (per_block, e8m0) are weight scales");
  } else if (s.IsMx()) {
    CheckMx(s, path, out);
  } else if (s.IsNvfp4()) {
    CheckNvfp4(s, path, out);
  } else if (s.mx_element_dtype) {
    out.Error(path + ".mx_element_dtype", StrCat("only used with dtype mx, dtype is ", Name(s.dtype)));
  }
  if (s.IsProgressive()) CheckProgressive(s, role, path, out);
  CheckGranularity(s, path, out);
  CheckObserver(s, role, path, out);
  if (role != TensorRole::kActivation && s.is_dynamic) {
    out.Error(path + ".is_dynamic", "weights and biases cannot be dynamic (their scales are computed once and exported)");
  }
  if (s.scale_type == ScaleType::kPof2 && s.dtype != DType::kInt8 && s.dtype != DType::kUInt8) {
    out.Error(path + ".scale_type", StrCat("pof2 scales need int8 or uint8, got ", Name(s.dtype)));
  }
  if (IsFloatFormat(s.ElementType()) && !s.symmetric) {
    out.Error(path + ".symmetric", StrCat(Name(s.ElementType()), " is symmetric only"));
  }
  if (s.zero_point_type == ZeroPointType::kFloat32 && !IsIntegerType(s.dtype)) {
    out.Error(path + ".zero_point_type", StrCat("float32 zero points need an integer dtype, got ", Name(s.dtype)));
  }
  if (IsCastType(s.dtype) && s.is_dynamic) {
    out.Warn(path + ".is_dynamic", StrCat(Name(s.dtype), " is a cast; is_dynamic has no effect"));
  }
}

void CheckLayerConfig(const LayerQuantConfig& c, const std::string& path, Issues& out) {
  if (c.weight) CheckSpec(*c.weight, TensorRole::kWeight, path + ".weight", out);
  if (c.weight && IsE8m0Tiles(*c.weight)) {  // #30: vLLM's steps 0 / 3a, weight and input together
    const QuantSpec* input = c.input_tensors ? &*c.input_tensors : nullptr;
    for (const auto& issue : E8m0TileIssues(*c.weight, input, path)) out.Error(issue.field, issue.message);
  }
  if (c.bias) CheckSpec(*c.bias, TensorRole::kBias, path + ".bias", out);
  if (c.input_tensors) CheckSpec(*c.input_tensors, TensorRole::kActivation, path + ".input_tensors", out);
  if (c.output_tensors) CheckSpec(*c.output_tensors, TensorRole::kActivation, path + ".output_tensors", out);
}

void CheckKvCache(const PatternQuantConfig& e, const std::string& path, Issues& out) {
  if (!e.config.output_tensors) {
    out.Error(path + ".output_tensors", "required: the KV-cache spec quantizes the k_proj / v_proj outputs");
    return;
  }
  const QuantSpec& kv = *e.config.output_tensors;
  if (kv.dtype != DType::kFp8E4M3 && kv.dtype != DType::kInt8) {
    out.Error(path + ".output_tensors.dtype", StrCat("KV cache supports fp8_e4m3 or int8, got ", Name(kv.dtype)));
  }
  if (kv.qscheme != QScheme::kPerTensor) {
    out.Error(path + ".output_tensors.qscheme", StrCat("KV cache is per_tensor, got ", Name(kv.qscheme)));
  }
  if (kv.is_dynamic) out.Error(path + ".output_tensors.is_dynamic", "KV-cache scales are static (they are exported)");
}

// The weight spec an algorithm works on: the Linear type entry when present, else the global one.
const std::optional<QuantSpec>& AlgoWeightSpec(const Config& c, std::string& path) {
  if (auto it = c.layer_type_quant_config.find("Linear"); it != c.layer_type_quant_config.end() && it->second.weight) {
    path = "layer_type_quant_config[Linear].weight";
    return it->second.weight;
  }
  path = "global_quant_config.weight";
  return c.global_quant_config.weight;
}

// GPTAQ's and Qronos's own fields (Quark 0.13's GPTAQConfig / QronosConfig).
void CheckAsymmetricFields(const GptqAlgo& a, const std::optional<QuantSpec>& weight, const std::string& path,
                           Issues& out) {
  if (a.method == HessianMethod::kGptq) return;
  const std::string_view name = AlgoName(AlgoConfig(a));
  if (!(std::isfinite(a.alpha) && a.alpha >= 0)) out.Error(path + ".alpha", StrCat("must be finite and >= 0, got ", a.alpha));
  if (a.method == HessianMethod::kQronos && !(std::isfinite(a.beta) && a.beta > 0)) {
    out.Error(path + ".beta", StrCat("must be finite and > 0, got ", a.beta));
  }
  if (weight && weight->qscheme == QScheme::kPerGroup && !a.static_groups) {
    out.Error(path + ".static_groups", StrCat("must be true for ", name, " with per_group weights (Quark 0.13's own ",
                                              "dynamic-group path of ", name, " fails)"));
  }
}

// #35 AutoRound: its ranges, and the weight formats its rounding offsets and clipping factors are defined on.
// A range check's "path.field: why" status as the issue at path.field.
void ReportFieldStatus(const absl::Status& st, Issues& out) {
  if (st.ok()) return;
  const std::string message(st.message());
  const size_t colon = message.find(": ");
  out.Error(message.substr(0, colon), message.substr(colon + 2));
}

void CheckAutoRoundAlgo(const AutoRoundAlgo& a, const std::optional<QuantSpec>& weight, const std::string& weight_path,
                        const std::string& path, Issues& out) {
  ReportFieldStatus(CheckAutoRoundRanges(a, path), out);
  const std::string why = AutoRoundWeightProblem(weight);
  if (!why.empty()) out.Error(path, StrCat("autoround needs ", why, " in ", weight_path));
}

// #35: the first weight spec that observes with imatrix_mse, as a field path; empty when none does.
std::string ImatrixMseWeightPath(const Config& c) {
  const auto uses = [](const LayerQuantConfig& l) { return l.weight && l.weight->observer == ObserverKind::kImatrixMse; };
  if (uses(c.global_quant_config)) return "global_quant_config.weight.observer";
  for (const auto& [type, l] : c.layer_type_quant_config) {
    if (uses(l)) return StrCat("layer_type_quant_config[", type, "].weight.observer");
  }
  for (const auto& e : c.layer_quant_config) {
    if (uses(e.config)) return StrCat("layer_quant_config[", e.pattern, "].weight.observer");
  }
  return {};
}

// #35: GPTQ's family and AutoRound choose the weights' parameters themselves (each group observed as GPTQ reaches
// it, or tuned), and AWQ searches its scales with the weight observer: none of them has the importance imatrix_mse
// searches with.
void CheckImatrixMseAlgo(const AlgoConfig& algo, const std::string& imatrix_path, const std::string& path,
                         Issues& out) {
  if (imatrix_path.empty() || !(std::holds_alternative<GptqAlgo>(algo) || std::holds_alternative<AutoRoundAlgo>(algo) ||
                                std::holds_alternative<AwqAlgo>(algo))) {
    return;
  }
  out.Error(path, StrCat(AlgoName(algo), " with imatrix_mse weights (", imatrix_path, "): ", AlgoName(algo),
                         " computes the weight parameters with its own observer; imatrix_mse runs with RTN, "
                         "rotation and SmoothQuant"));
}

void CheckAlgorithms(const Config& c, Issues& out) {
  const std::string imatrix_path = ImatrixMseWeightPath(c);
  std::set<std::string_view> seen;
  std::string_view hessian_algo;  // gptq, gptaq or qronos: one pass runs one of them
  for (size_t i = 0; i < c.algo_config.size(); ++i) {
    const AlgoConfig& algo = c.algo_config[i];
    const std::string path = StrCat("algo_config[", i, "]");
    const std::string_view name = AlgoName(algo);
    CheckImatrixMseAlgo(algo, imatrix_path, path, out);
    if (!seen.insert(name).second) out.Error(path, StrCat(name, " appears twice"));
    if (std::holds_alternative<GptqAlgo>(algo)) {
      if (!hessian_algo.empty() && hessian_algo != name) {
        out.Error(path, StrCat(name, " after ", hessian_algo, ": both round the same weights; choose one"));
      }
      hessian_algo = name;
    }
    // Rotation changes the basis every later algorithm works in: it runs first, offline.
    if (std::holds_alternative<RotationAlgo>(algo) && i != 0) out.Error(path, "rotation must be the first algorithm");
    // The scaling algorithms rescale the float weights that GPTQ then rounds: Quark's order, enforced.
    if (!hessian_algo.empty() && !std::holds_alternative<GptqAlgo>(algo) && !std::holds_alternative<RotationAlgo>(algo) &&
        !std::holds_alternative<AutoRoundAlgo>(algo)) {  // #35: AutoRound after GPTQ has its own message below
      out.Error(path, StrCat(name, " must come before ", hessian_algo, " (it rescales the float weights ",
                             hessian_algo, " rounds)"));
    }
    // --- #35 AutoRound: rounds the weights itself, so neither it nor GPTQ may round them again ---
    if (seen.count("autoround") && !std::holds_alternative<AutoRoundAlgo>(algo) &&
        !std::holds_alternative<RotationAlgo>(algo)) {
      out.Error(path, StrCat(name, std::holds_alternative<GptqAlgo>(algo)
                                       ? " after autoround: both choose the rounding of the same weights (use one)"
                                       : " must come before autoround (it rescales the float weights AutoRound rounds)"));
    }
    if (std::holds_alternative<AutoRoundAlgo>(algo) && !hessian_algo.empty()) {
      out.Error(path, StrCat("autoround after ", hessian_algo, ": both choose the rounding of the same weights (use one)"));
    }
    // --- end AutoRound ---
    std::string weight_path;
    const auto& weight = AlgoWeightSpec(c, weight_path);
    if (const auto* gptq = std::get_if<GptqAlgo>(&algo)) {
      // GPTQ rounds with the engine's own quantizer, so any static weight format works (int, fp8/fp6/fp4, MX).
      if (!weight || IsCastType(weight->dtype) || weight->is_dynamic) {
        out.Error(path, StrCat(name, " needs a static quantized weight spec in ", weight_path, ", got ",
                               !weight ? std::string("none") : weight->is_dynamic ? std::string("a dynamic one")
                                                                               : std::string(Name(weight->dtype))));
      }
      if (gptq->method != HessianMethod::kQronos && !(gptq->damp_percent > 0.0f && gptq->damp_percent <= 1.0f)) {
        out.Error(path + ".damp_percent", StrCat("must be in (0, 1], got ", gptq->damp_percent));
      }
      CheckAsymmetricFields(*gptq, weight, path, out);
      if (gptq->block_size <= 0) out.Error(path + ".block_size", StrCat("must be positive, got ", gptq->block_size));
      if (gptq->desc_act && !gptq->static_groups) {
        out.Error(path + ".static_groups", "must be true with desc_act: act order needs the groups fixed up front");
      }
    } else if (const auto* autoround = std::get_if<AutoRoundAlgo>(&algo)) {  // #35 AutoRound
      CheckAutoRoundAlgo(*autoround, weight, weight_path, path, out);
    } else if (const auto* rotation = std::get_if<RotationAlgo>(&algo)) {  // #35 learned rotation
      ReportFieldStatus(CheckRotationTrainingRanges(*rotation, path), out);
    } else if (std::holds_alternative<AwqAlgo>(algo)) {
      // Quark's AWQ searches with the layer's own weight quantizer (ScaledFakeQuantize, NonScaledFakeQuantize for MX),
      // so any static weight format: integer, fp8/fp4 per channel or group, MX, NVFP4, W4A8. Not 2-D tiles: the clip
      // search quantizes batches of 64 or 256 output channels, which [rows, cols] tiles need not divide.
      if (!weight || IsCastType(weight->dtype) || weight->is_dynamic) {
        out.Error(path, StrCat("awq needs a static quantized weight spec in ", weight_path, ", got ",
                               !weight ? std::string("none") : weight->is_dynamic ? std::string("a dynamic one")
                                                                               : std::string(Name(weight->dtype))));
      } else if (weight->qscheme == QScheme::kPerBlock) {
        out.Error(path, StrCat("awq does not run per_block weights (", weight_path, ".qscheme): its clip search "
                               "quantizes batches of 64 or 256 output channels, which 2-D tiles need not divide"));
      }
      if (std::get<AwqAlgo>(algo).grid_size <= 0) out.Error(path + ".grid_size", "must be positive");
    } else if (const auto* sq = std::get_if<SmoothQuantAlgo>(&algo)) {
      if (!c.global_quant_config.input_tensors && c.layer_type_quant_config.count("Linear") == 0) {
        out.Error(path, "smooth (SmoothQuant) needs quantized input_tensors: it moves activation outliers into weights");
      }
      if (!(sq->alpha >= 0.0f && sq->alpha <= 1.0f)) {
        out.Error(path + ".alpha", StrCat("must be in [0, 1], got ", sq->alpha));
      }
      if (!(sq->scale_clamp_min > 0.0f)) {
        out.Error(path + ".scale_clamp_min", StrCat("must be positive, got ", sq->scale_clamp_min));
      }
    } else if (const auto* asq = std::get_if<AutoSmoothQuantAlgo>(&algo)) {
      if (asq->compute_scale_loss != "MSE" && asq->compute_scale_loss != "MAE") {
        out.Error(path + ".compute_scale_loss", StrCat("one of MSE, MAE; got \"", asq->compute_scale_loss, "\""));
      }
      if (!c.global_quant_config.input_tensors) {
        out.Error(path, "autosmoothquant needs quantized input_tensors in global_quant_config");
      }
    }
  }
}

const std::set<std::string>& KnownModuleTypes() {
  static const std::set<std::string> types = {"Linear", "Embedding", "EmbeddingBag", "Conv2d", "ConvTranspose2d"};
  return types;
}

std::string PathOf(const LayerAssignment& a) {
  switch (a.source) {
    case ConfigSource::kLayerPattern: return "layer_quant_config[" + a.source_key + "]";
    case ConfigSource::kLayerType: return "layer_type_quant_config[" + a.source_key + "]";
    default: return "global_quant_config";
  }
}

void CheckAgainstModel(const Config& c, const std::vector<ModuleInfo>& modules, Issues& out) {
  const LayerPlan plan = BuildLayerPlan(c, modules);
  std::set<std::string> reported;  // one error per (spec path, dimension), naming the first module
  for (size_t i = 0; i < plan.layers.size(); ++i) {
    const LayerAssignment& a = plan.layers[i];
    const ModuleInfo& m = modules[i];
    const auto& w = a.config.weight;
    if (w && w->qscheme == QScheme::kPerBlock && w->block_size.size() == 2 && m.weight_shape.size() == 2 &&
        (m.weight_shape[0] % w->block_size[0] != 0 || m.weight_shape[1] % w->block_size[1] != 0)) {
      out.Error(PathOf(a) + ".weight.block_size",
                StrCat("[", w->block_size[0], ", ", w->block_size[1], "] does not tile ", m.name, " (weight [",
                       m.weight_shape[0], ", ", m.weight_shape[1], "]; rule: out_features % ", w->block_size[0],
                       " == 0 and in_features % ", w->block_size[1], " == 0)"));
      continue;
    }
    if (!w || w->qscheme != QScheme::kPerGroup || w->IsMx() || !w->group_size || *w->group_size <= 0) continue;
    if (m.weight_shape.size() < 2) continue;
    const int64_t in_features = m.weight_shape[1];
    if (in_features % *w->group_size == 0) continue;
    const std::string path = PathOf(a) + ".weight.group_size";
    if (!reported.insert(StrCat(path, "/", in_features)).second) continue;
    out.Error(path, StrCat(*w->group_size, " does not divide in_features ", in_features, " of ", m.name, " (weight [",
                           m.weight_shape[0], ", ", in_features, "]; rule: in_features % ",
                           w->IsNvfp4() ? "16 == 0 for NVFP4" : "group_size == 0", ")"));
  }
  auto matches_any = [&](const std::string& pattern) {
    for (const auto& m : modules) {
      if (GlobMatch(pattern, m.name)) return true;
    }
    return false;
  };
  for (size_t i = 0; i < c.exclude.size(); ++i) {
    if (!matches_any(c.exclude[i])) {
      out.Error(StrCat("exclude[", i, "]"), StrCat("\"", c.exclude[i], "\" matches no module of the model"));
    }
  }
  for (const auto& e : c.layer_quant_config) {
    if (!matches_any(e.pattern)) {
      out.Warn("layer_quant_config[" + e.pattern + "]", "matches no module of the model");
    }
  }
  for (const auto& e : c.kv_cache_quant_config) {
    if (!matches_any(e.pattern)) {
      out.Error("kv_cache_quant_config[" + e.pattern + "]", "matches no module of the model (no KV projection)");
    }
  }
}

}  // namespace

std::vector<ValidationIssue> ValidateConfig(const Config& c, const std::vector<ModuleInfo>* modules) {
  Issues out;
  CheckLayerConfig(c.global_quant_config, "global_quant_config", out);
  for (const auto& [type, layer] : c.layer_type_quant_config) {
    const std::string path = "layer_type_quant_config[" + type + "]";
    if (KnownModuleTypes().count(type) == 0) {
      out.Error(path, "unknown module type (one of Linear, Embedding, EmbeddingBag, Conv2d, ConvTranspose2d)");
    }
    CheckLayerConfig(layer, path, out);
  }
  for (const auto& e : c.layer_quant_config) {
    const std::string path = "layer_quant_config[" + e.pattern + "]";
    if (e.pattern.empty()) out.Error("layer_quant_config", "an entry has an empty pattern");
    CheckLayerConfig(e.config, path, out);
  }
  for (const auto& e : c.kv_cache_quant_config) {
    const std::string path = "kv_cache_quant_config[" + e.pattern + "]";
    CheckLayerConfig(e.config, path, out);
    CheckKvCache(e, path, out);
  }
  for (size_t i = 0; i < c.exclude.size(); ++i) {
    if (c.exclude[i].empty()) out.Error(StrCat("exclude[", i, "]"), "empty pattern");
  }
  if (c.min_kv_scale < 0.0f) out.Error("export_options.min_kv_scale", StrCat("must be >= 0, got ", c.min_kv_scale));
  CheckAlgorithms(c, out);
  bool quantizes_anything = !c.global_quant_config.Empty() || !c.kv_cache_quant_config.empty();
  for (const auto& [type, layer] : c.layer_type_quant_config) quantizes_anything |= !layer.Empty();
  for (const auto& e : c.layer_quant_config) quantizes_anything |= !e.config.Empty();
  if (!quantizes_anything) out.Error("global_quant_config", "the config quantizes no tensor at all");
  if (modules != nullptr) CheckAgainstModel(c, *modules, out);
  return out.Take();
}

absl::Status ValidationStatus(const std::vector<ValidationIssue>& issues) {
  std::vector<std::string> errors;
  for (const auto& issue : issues) {
    if (issue.severity == ValidationIssue::Severity::kError) errors.push_back(issue.ToString());
  }
  if (errors.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(StrJoin(errors, "; "));
}

}  // namespace quark
