#include "core/export/ct_source.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "absl/strings/match.h"
#include "core/base/strings.h"
#include "core/checkpoint/model_layout.h"
#include "core/export/ct_config.h"
#include "core/export/ct_families.h"
#include "core/export/ct_layout.h"
#include "core/export/ct_moe_rules.h"
#include "core/export/ct_read_config.h"
#include "core/export/ct_transform.h"
#include "core/export/hf_quark_layout.h"
#include "core/numerics/quant_layout.h"
#include "core/runtime/tensor_view.h"
#include "core/runtime/tokenizer.h"
#include "kernels/cpu/nvfp4_kernels.h"

namespace quark::exporter {
namespace {

using checkpoint::StDType;

bool IsFloatStorage(StDType d) { return d == StDType::kF32 || d == StDType::kF16 || d == StDType::kBF16; }

// The stored tensor `name` if its shape (and, for codes, dtype) is the one `specs` plans; float scales may be any of
// F32 / F16 / BF16 (the writer's choice depends on the model dtype).
absl::Status CheckPlanned(const checkpoint::TensorInfo& info, const std::string& name,
                          const std::vector<ExportTensorSpec>& specs) {
  for (const ExportTensorSpec& spec : specs) {
    if (spec.name != name) continue;
    const bool dtype_ok = std::find(spec.dtypes.begin(), spec.dtypes.end(), info.dtype) != spec.dtypes.end() ||
                          (IsFloatStorage(spec.dtypes[0]) && IsFloatStorage(info.dtype));
    if (!dtype_ok) {
      return absl::InvalidArgumentError(StrCat(name, ": dtype ", checkpoint::StDTypeName(info.dtype), ", expected ",
                                               checkpoint::StDTypeName(spec.dtypes[0])));
    }
    if (info.shape != spec.shape) {
      return absl::InvalidArgumentError(
          StrCat(name, ": shape [", StrJoin(info.shape, ", "), "], expected [", StrJoin(spec.shape, ", "), "]"));
    }
    return absl::OkStatus();
  }
  return absl::InternalError(StrCat(name, ": not among the format's tensors"));
}

}  // namespace

std::string ExportQuantMethod(const std::string& dir) {
  std::ifstream in(dir + "/config.json");
  if (!in) return "";
  const nlohmann::json config = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) return "";
  const auto q = config.find("quantization_config");
  if (q == config.end() || !q->is_object()) return "";
  const auto m = q->find("quant_method");
  return m != q->end() && m->is_string() ? m->get<std::string>() : "";
}

namespace {

// Whether g is Nvfp4GlobalScale(a) = fl(a / 2688) for some float32 amax a, as every global scale the engine makes is;
// about a third of float32 values are not (2688 = 21 * 128 spreads consecutive a over ~1.5 ulps of g).
bool IsEngineGlobalScale(float g) {
  float a = std::nextafter(std::nextafter(g * 2688.0f, 0.0f), 0.0f);
  for (int step = 0; step < 5; ++step, a = std::nextafter(a, INFINITY)) {
    if (kernels::Nvfp4GlobalScale(a) == g) return true;
  }
  return false;
}

}  // namespace

float CtGlobalScaleFromDivisor(float divisor) {
  // The float32 preimages of the divisor (at most a few around fl(1 / divisor)), nearest to 1 / divisor first.
  const float nearest = 1.0f / divisor;
  std::vector<float> preimages;
  for (float x : {nearest, std::nextafter(nearest, INFINITY), std::nextafter(nearest, 0.0f),
                  std::nextafter(std::nextafter(nearest, INFINITY), INFINITY),
                  std::nextafter(std::nextafter(nearest, 0.0f), 0.0f)}) {
    if (1.0f / x == divisor) preimages.push_back(x);
  }
  if (preimages.empty()) return nearest;
  // Of two preimages, the one the engine's formula can produce; else the nearest.
  std::vector<float> engine;
  for (float x : preimages) {
    if (IsEngineGlobalScale(x)) engine.push_back(x);
  }
  return engine.size() == 1 ? engine[0] : preimages[0];
}

absl::StatusOr<std::shared_ptr<CtWeightSource>> CtWeightSource::Open(const std::string& dir,
                                                                     at::ScalarType compute_dtype) {
  const std::string path = dir + "/config.json";
  auto text = runtime::ReadTextFile(path);
  if (!text.ok()) return text.status();
  const auto json = nlohmann::json::parse(*text, nullptr, false);
  if (json.is_discarded() || !json.is_object() || !json.contains("quantization_config") ||
      !json["quantization_config"].is_object() ||
      json["quantization_config"].value("quant_method", "") != "compressed-tensors") {
    return absl::InvalidArgumentError(StrCat(
        path, ": no quantization_config with quant_method \"compressed-tensors\" (not a compressed-tensors export)"));
  }
  auto model = checkpoint::ParseModelConfig(*text, path);
  if (!model.ok()) return model.status();
  if (auto s = CtSupportsExperts(*model); !s.ok()) {
    return absl::UnimplementedError(StrCat(path, ": ", std::string(s.message())));
  }
  const std::vector<ModuleInfo> modules = ModulesFromConfig(*model);
  auto config = ConfigFromCompressedTensors(json["quantization_config"], modules);
  if (!config.ok()) {
    return absl::Status(config.status().code(),
                        StrCat(path, ": quantization_config.", std::string(config.status().message())));
  }
  auto reader = checkpoint::CheckpointReader::Open(dir);
  if (!reader.ok()) return reader.status();
  std::shared_ptr<CtWeightSource> source(
      new CtWeightSource(std::shared_ptr<const checkpoint::CheckpointReader>(*std::move(reader))));
  for (const ModuleInfo& m : modules) {
    if (m.type == "Linear" && m.weight_shape.size() == 2) {
      source->linear_shapes_[m.name] = {m.weight_shape[0], m.weight_shape[1]};
    }
  }
  // #35 item 4: the online input transforms (R4), checked against the linears and the stored matrices up front.
  auto transforms = CtInputTransforms(json["quantization_config"].value("transform_config", nlohmann::json()));
  if (!transforms.ok()) {
    return absl::Status(transforms.status().code(),
                        StrCat(path, ": quantization_config.", std::string(transforms.status().message())));
  }
  // A module's own matrix, else the one its scheme stores for that size: compressed-tensors shares one matrix per
  // (scheme, size) and save_pretrained keeps it once (tied weights); vLLM shares it the same way (its data key).
  std::map<std::pair<std::string, int64_t>, std::string> stored;  // (scheme, n) -> a stored matrix
  std::vector<std::pair<std::string, const CtInputTransform*>> targeted;
  for (const auto& [module, shape] : source->linear_shapes_) {
    const CtInputTransform* t = CtInputTransformFor(*transforms, module);
    if (t == nullptr) continue;
    targeted.push_back({module, t});
    const std::string name = CtTransformWeightName(module, t->scheme, "input");
    auto ref = source->reader().Get(name);
    if (!ref.ok()) continue;
    const checkpoint::TensorInfo& info = *ref->info;
    if (!IsFloatStorage(info.dtype) || info.shape != std::vector<int64_t>{shape.second, shape.second}) {
      return absl::InvalidArgumentError(StrCat(name, ": ", checkpoint::StDTypeName(info.dtype), " [",
                                               StrJoin(info.shape, ", "), "], expected a float [", shape.second, ", ",
                                               shape.second, "] (", module, "'s in_features)"));
    }
    stored.emplace(std::make_pair(t->scheme, shape.second), name);
    source->input_transforms_[module] = name;
  }
  for (const auto& [module, t] : targeted) {
    if (source->input_transforms_.count(module)) continue;
    const int64_t n = source->linear_shapes_.at(module).second;
    const auto it = stored.find({t->scheme, n});
    if (it == stored.end()) {
      return absl::NotFoundError(StrCat(CtTransformWeightName(module, t->scheme, "input"), ": missing from ", dir,
                                        ", and no other module stores a [", n, ", ", n, "] matrix of transform ",
                                        t->scheme, " (transform_config.config_groups.", t->scheme, " targets ",
                                        module, ")"));
    }
    source->input_transforms_[module] = it->second;
  }
  source->SetUp(*std::move(config), *std::move(model), compute_dtype);
  return source;
}

absl::StatusOr<at::Tensor> CtWeightSource::InputTransform(const std::string& module) const {
  const auto it = input_transforms_.find(module);
  if (it == input_transforms_.end()) return at::Tensor();
  auto stored = Stored(it->second);
  if (!stored.ok()) return stored.status();
  return stored->to(at::kDouble);
}

absl::StatusOr<at::Tensor> CtWeightSource::Stored(const std::string& name) const {
  auto ref = reader().Get(name);
  if (!ref.ok()) return absl::NotFoundError(StrCat(name, ": missing from ", Location()));
  return runtime::ViewTensor(*ref);
}

absl::StatusOr<at::Tensor> CtWeightSource::Dequantized(const std::string& module, const QuantSpec& spec,
                                                       at::ScalarType dtype) const {
  const auto shape = linear_shapes_.find(module);
  const LayerAssignment* a = Assignment(module);
  if (shape == linear_shapes_.end() || a == nullptr) return absl::NotFoundError(StrCat(module, ": not a linear"));
  const auto [out, in] = shape->second;
  auto specs = CtLinearTensors(module, a->config, out, in, false, StDType::kF32, StDType::kF32);
  if (!specs.ok()) return specs.status();
  auto format = CtFormatOf(a->config, module);
  if (!format.ok()) return format.status();
  const CtStoredTensor get = [&](const std::string& suffix) -> absl::StatusOr<at::Tensor> {
    const std::string name = StrCat(module, ".", suffix);
    auto ref = reader().Get(name);
    if (!ref.ok()) return absl::NotFoundError(StrCat(name, ": missing from ", Location()));
    if (auto s = CheckPlanned(*ref->info, name, *specs); !s.ok()) return s;
    return runtime::ViewTensor(*ref);
  };
  auto q = FindCtFamily(*format)->unpack(get, spec, out, in);
  if (!q.ok()) return q.status();
  if (spec.IsNvfp4()) {
    q->global_scale = at::scalar_tensor(CtGlobalScaleFromDivisor(q->global_scale.item<float>()), at::kFloat);
  } else if (!spec.IsMx()) {  // compressed-tensors' [N, 1] / [1] / [N, K/G] scales in the numerics' parameter shape
    auto layout = ResolveLayout(spec, TensorRole::kWeight, {out, in});
    if (!layout.ok()) return layout.status();
    q->scale = q->scale.reshape(layout->param_shape);
    if (q->zero_point.defined()) q->zero_point = q->zero_point.reshape(layout->param_shape);
  }
  if (!q->zero_point.defined()) q->zero_point = at::zeros(q->scale.sizes(), at::kInt);
  auto weight = Dequantize(*q, spec, dtype == at::kDouble ? at::kFloat : dtype, TensorRole::kWeight);
  if (!weight.ok()) {
    return absl::Status(weight.status().code(), StrCat(module, ".weight: ", std::string(weight.status().message())));
  }
  return weight->to(dtype);
}

absl::StatusOr<std::optional<QuantParams>> CtWeightSource::StaticParams(const std::string& module,
                                                                        const std::optional<QuantSpec>& spec,
                                                                        const char* prefix) const {
  if (spec && spec->IsNvfp4()) {  // dynamic groups under the calibrated global scale, stored as a divisor
    auto divisor = Stored(StrCat(module, ".", prefix, "_global_scale"));
    if (!divisor.ok()) return divisor.status();
    const float g = CtGlobalScaleFromDivisor(divisor->to(at::kFloat).reshape({}).item<float>());
    return std::optional<QuantParams>(QuantParams{at::Tensor(), at::Tensor(), at::scalar_tensor(g, at::kFloat)});
  }
  if (!spec || spec->is_dynamic || IsCastType(spec->dtype)) return std::optional<QuantParams>();
  if (spec->qscheme != QScheme::kPerTensor) {
    return absl::InvalidArgumentError(StrCat(module, ".", prefix, "_scale: a static ", Name(spec->qscheme),
                                             " activation (compressed-tensors stores per-tensor ones)"));
  }
  std::string scale_name = StrCat(module, ".", prefix, "_scale");
  const bool kv = std::string_view(prefix) == "output";
  if (kv && !reader().Has(scale_name)) {  // llm-compressor's newer names: the attention's k_scale / v_scale
    const size_t dot = module.rfind('.');
    const bool key = absl::EndsWith(module, "k_proj");
    if (dot != std::string::npos && (key || absl::EndsWith(module, "v_proj"))) {
      const std::string attention_scale = StrCat(module.substr(0, dot), key ? ".k_scale" : ".v_scale");
      if (reader().Has(attention_scale)) scale_name = attention_scale;
    }
  }
  auto scale = Stored(scale_name);
  if (!scale.ok()) return scale.status();
  if (scale->numel() != 1)
    return absl::InvalidArgumentError(StrCat(scale_name, ": ", scale->numel(), " values, not 1"));
  QuantParams params;
  params.scale = scale->to(ScaleDtypeFor(*spec, compute_dtype())).reshape({});
  params.zero_point = at::zeros({}, at::kInt);
  const std::string zp_name = StrCat(module, ".", prefix, "_zero_point");
  if (reader().Has(zp_name)) {
    auto zp = Stored(zp_name);
    if (!zp.ok()) return zp.status();
    if (zp->numel() != 1) return absl::InvalidArgumentError(StrCat(zp_name, ": ", zp->numel(), " values, not 1"));
    params.zero_point = zp->to(at::kInt).reshape({});
  }
  return std::optional<QuantParams>(std::move(params));
}

}  // namespace quark::exporter
