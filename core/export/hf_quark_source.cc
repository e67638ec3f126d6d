#include "core/export/hf_quark_source.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/base/strings.h"
#include "core/config/mxfp8_tiles_as_mx.h"
#include "core/config/quark_json.h"
#include "core/export/hf_quark_layout.h"
#include "core/numerics/packing.h"
#include "core/runtime/tensor_view.h"

namespace quark::exporter {
namespace {

bool QuantizedWeight(const LayerAssignment* a) {
  return a != nullptr && a->source != ConfigSource::kExcluded && a->config.weight && !IsCastType(a->config.weight->dtype);
}

}  // namespace

absl::StatusOr<std::shared_ptr<HfQuarkWeightSource>> HfQuarkWeightSource::Open(const std::string& dir,
                                                                             at::ScalarType compute_dtype) {
  std::ifstream in(dir + "/config.json");
  if (!in) return absl::NotFoundError(StrCat(dir, "/config.json: cannot open"));
  std::stringstream text;
  text << in.rdbuf();
  const auto json = nlohmann::ordered_json::parse(text.str(), nullptr, false);
  if (json.is_discarded() || !json.contains("quantization_config")) {
    return absl::InvalidArgumentError(StrCat(dir, "/config.json: no quantization_config (not a Quark export)"));
  }
  auto config = ConfigFromQuarkJson(json["quantization_config"]);
  if (!config.ok()) return config.status();
  auto model = checkpoint::ParseModelConfig(text.str(), dir + "/config.json");
  if (!model.ok()) return model.status();
  auto reader = checkpoint::CheckpointReader::Open(dir);
  if (!reader.ok()) return reader.status();
  std::shared_ptr<HfQuarkWeightSource> source(
      new HfQuarkWeightSource(std::shared_ptr<const checkpoint::CheckpointReader>(*std::move(reader))));
  // #30: an MXFP8 weight is declared as [1, 32] E8M0 tiles; read it as the OCP MX it is, whose last partial block
  // (in_features not a multiple of 32) is padded as Quark's exporter writes it, which tiles cannot express.
  source->SetUp(WithExportedMxfp8AsMx(*std::move(config)), *std::move(model), compute_dtype);
  return source;
}

void HfQuarkWeightSource::SetUp(Config config, checkpoint::ModelConfig model, at::ScalarType compute_dtype) {
  config_ = std::move(config);
  model_ = std::move(model);
  plan_ = BuildLayerPlan(config_, ModulesFromConfig(model_));
  compute_dtype_ = compute_dtype;
}

absl::StatusOr<at::Tensor> HfQuarkWeightSource::Dequantized(const std::string& module, const QuantSpec& spec,
                                                            at::ScalarType dtype) const {
  auto view = [&](const std::string& name) -> absl::StatusOr<at::Tensor> {
    auto ref = reader_->Get(name);
    if (!ref.ok()) return ref.status();
    return runtime::ViewTensor(*ref);
  };
  RealQuantized packed;
  auto codes = view(module + ".weight");
  if (!codes.ok()) return codes.status();
  packed.codes = *codes;
  // #30 W4A8: the int4 stage is weight_scale_2 / weight_zero_point_2, the fp8 stage's scale weight_scale.
  const bool w4a8 = spec.IsProgressive();
  auto scale = view(module + (w4a8 ? ".weight_scale_2" : ".weight_scale"));
  if (!scale.ok()) return scale.status();
  packed.scale = spec.IsMx() || spec.IsNvfp4() ? *scale : scale->to(ScaleDtypeFor(spec, compute_dtype_));
  if (spec.IsNvfp4() || w4a8) {  // NVFP4: F8_E4M3 block scales stay bytes, the global scale is weight_scale_2
    auto global = view(module + (w4a8 ? ".weight_scale" : ".weight_scale_2"));
    if (!global.ok()) return global.status();
    packed.global_scale = global->to(at::kFloat).reshape({});
  }
  const std::string zp_name = module + (w4a8 ? ".weight_zero_point_2" : ".weight_zero_point");
  if (reader_->Has(zp_name)) {
    auto zp = view(zp_name);
    if (!zp.ok()) return zp.status();
    packed.zero_point = zp->to(at::kInt);
  }
  auto real = UnpackFromExport(packed, spec, config_.pack_method);
  if (!real.ok()) return absl::Status(real.status().code(), StrCat(module, ".weight: ", std::string(real.status().message())));
  if (!real->zero_point.defined()) real->zero_point = at::zeros(real->scale.sizes(), at::kInt);
  auto weight = Dequantize(*real, spec, dtype == at::kDouble ? at::kFloat : dtype, TensorRole::kWeight);
  if (!weight.ok()) return absl::Status(weight.status().code(), StrCat(module, ".weight: ", std::string(weight.status().message())));
  return weight->to(dtype);
}

absl::StatusOr<at::Tensor> HfQuarkWeightSource::Get(const std::string& name, at::ScalarType dtype) const {
  const std::string suffix = ".weight";
  if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
    const std::string module = name.substr(0, name.size() - suffix.size());
    const LayerAssignment* a = plan_.Find(module);
    if (QuantizedWeight(a)) return Dequantized(module, *a->config.weight, dtype);
  }
  return float_.Get(name, dtype);
}

absl::StatusOr<at::Tensor> HfQuarkWeightSource::GetStored(const std::string& name) const {
  const std::string suffix = ".weight";
  if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
      QuantizedWeight(plan_.Find(name.substr(0, name.size() - suffix.size())))) {
    return Get(name, at::kFloat);
  }
  return float_.GetStored(name);
}

absl::StatusOr<std::optional<QuantParams>> HfQuarkWeightSource::StaticParams(const std::string& module,
                                                                             const std::optional<QuantSpec>& spec,
                                                                             const char* prefix) const {
  if (spec && spec->IsNvfp4()) {  // dynamic groups under the exported global scale
    auto ref = reader_->Get(StrCat(module, ".", prefix, "_scale_2"));
    if (!ref.ok()) return ref.status();
    auto global = runtime::ViewTensor(*ref);
    if (!global.ok()) return global.status();
    return std::optional<QuantParams>(QuantParams{at::Tensor(), at::Tensor(), global->to(at::kFloat).reshape({})});
  }
  if (!spec || spec->is_dynamic || IsCastType(spec->dtype)) return std::optional<QuantParams>();
  const std::string scale_name = StrCat(module, ".", prefix, "_scale");
  auto ref = reader_->Get(scale_name);
  if (!ref.ok()) return ref.status();
  auto scale = runtime::ViewTensor(*ref);
  if (!scale.ok()) return scale.status();
  // Per tensor: shape () in the numerics (exported as a scalar or [1]); per channel: [C].
  const bool per_tensor = spec->qscheme == QScheme::kPerTensor;
  QuantParams params;
  params.scale = scale->to(ScaleDtypeFor(*spec, compute_dtype_));
  if (per_tensor) params.scale = params.scale.reshape({});
  const std::string zp_name = StrCat(module, ".", prefix, "_zero_point");
  if (reader_->Has(zp_name)) {
    auto zp = runtime::ViewTensor(*reader_->Get(zp_name));
    if (!zp.ok()) return zp.status();
    params.zero_point = zp->to(at::kInt).reshape(params.scale.sizes());
  } else {
    params.zero_point = at::zeros(params.scale.sizes(), at::kInt);
  }
  return std::optional<QuantParams>(std::move(params));
}

absl::StatusOr<ExportedActivations> HfQuarkWeightSource::Activations(const std::string& module) const {
  const LayerAssignment* a = plan_.Find(module);
  if (a == nullptr) return absl::NotFoundError(StrCat(module, ": not a module of ", Location()));
  ExportedActivations out;
  if (a->source == ConfigSource::kExcluded) return out;
  auto input = StaticParams(module, a->config.input_tensors, "input");
  if (!input.ok()) return input.status();
  auto output = StaticParams(module, a->config.output_tensors, "output");
  if (!output.ok()) return output.status();
  out.input = *std::move(input);
  out.output = *std::move(output);
  return out;
}

}  // namespace quark::exporter
