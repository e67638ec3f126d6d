// Reads Quark's HF export back: a WeightSource that dequantizes the packed weights of every quantized linear on
// load (so the runtime can stream and evaluate an exported model), and the exported static activation scales.
// A compressed-tensors export is read by the subclass CtWeightSource (ct_source.h), which decodes its own tensors.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/model_config.h"
#include "core/config/layer_plan.h"
#include "core/numerics/quant_params.h"
#include "core/runtime/weight_source.h"

namespace quark::exporter {

/// The static activation parameters of one exported linear (unset when dynamic, a cast or not quantized).
struct ExportedActivations {
  std::optional<QuantParams> input;
  std::optional<QuantParams> output;
};

class HfQuarkWeightSource : public runtime::WeightSource {
 public:
  /// Opens an export folder: config.json with a Quark quantization_config, and its safetensors.
  /// `compute_dtype` is the dtype scales are brought to (the numerics' scale dtype for it).
  /// Errors name the file and key: no quantization_config, a config that does not parse, unreadable shards.
  static absl::StatusOr<std::shared_ptr<HfQuarkWeightSource>> Open(const std::string& dir,
                                                                   at::ScalarType compute_dtype = at::kFloat);

  /// A quantized linear's ".weight": its codes unpacked and dequantized to `dtype`. Every other tensor as a float
  /// checkpoint gives it. INVALID_ARGUMENT naming the tensor when a code / scale / zero point does not fit.
  absl::StatusOr<at::Tensor> Get(const std::string& name, at::ScalarType dtype) const override;
  absl::StatusOr<at::Tensor> GetStored(const std::string& name) const override;
  bool Has(const std::string& name) const override { return float_.Has(name); }
  void Prefetch(const std::string& prefix) const override { float_.Prefetch(prefix); }
  std::string Location() const override { return float_.Location(); }

  /// The config `module` was quantized with (nullptr when the module is unknown); excluded modules have an
  /// empty config.
  const LayerAssignment* Assignment(const std::string& module) const { return plan_.Find(module); }
  /// The exported input_scale / output_scale (and zero points) of `module`, as QuantParams.
  absl::StatusOr<ExportedActivations> Activations(const std::string& module) const;

  const Config& config() const { return config_; }
  const checkpoint::ModelConfig& model_config() const { return model_; }

 protected:
  explicit HfQuarkWeightSource(std::shared_ptr<const checkpoint::CheckpointReader> reader)
      : reader_(reader), float_(std::move(reader)) {}
  /// The engine Config the export was written with and the model's config; builds the layer plan.
  void SetUp(Config config, checkpoint::ModelConfig model, at::ScalarType compute_dtype);
  /// A quantized linear's weight [out, in] dequantized to `dtype` (float32, bfloat16 or float16; float64 via float32).
  virtual absl::StatusOr<at::Tensor> Dequantized(const std::string& module, const QuantSpec& spec,
                                                 at::ScalarType dtype) const;
  /// The static parameters of `module`'s input ("input") or output ("output") quantization; empty when dynamic.
  virtual absl::StatusOr<std::optional<QuantParams>> StaticParams(const std::string& module,
                                                                  const std::optional<QuantSpec>& spec,
                                                                  const char* prefix) const;
  const checkpoint::CheckpointReader& reader() const { return *reader_; }
  at::ScalarType compute_dtype() const { return compute_dtype_; }

 private:
  std::shared_ptr<const checkpoint::CheckpointReader> reader_;
  runtime::CheckpointWeightSource float_;
  Config config_;
  checkpoint::ModelConfig model_;
  LayerPlan plan_;
  at::ScalarType compute_dtype_ = at::kFloat;
};

}  // namespace quark::exporter
