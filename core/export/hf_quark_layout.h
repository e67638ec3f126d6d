// The tensors of Quark's HF export (checkpoint-format.md, "Tensors written per quantized linear"): for every
// quantized linear X, the names, safetensors dtypes and shapes of X.weight, X.weight_scale, X.weight_zero_point,
// X.input_scale, X.input_zero_point, X.output_scale (KV cache) and X.bias. One table serves the writer (which
// plans every tensor before the first byte) and the consumer-rule checker (which reads an export back).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/checkpoint/dtype.h"
#include "core/checkpoint/model_config.h"
#include "core/config/layer_plan.h"
#include "core/config/quant_spec.h"
#include "core/export/hf_quark_tensor_plan.h"
#include "core/numerics/quant_params.h"
#include "core/numerics/real_quant.h"

namespace quark::exporter {

/// One tensor ready to write: name, dtype, shape and its little-endian bytes (a contiguous CPU tensor).
struct ExportTensor {
  std::string name;
  checkpoint::StDType dtype = checkpoint::StDType::kF32;
  at::Tensor data;  // contiguous; bytes = data.nbytes()
};

/// What a frozen quantized linear hands the exporter.
struct LinearExportData {
  std::string module;
  LayerQuantConfig config;
  at::Tensor weight;     // float [out, in]: used when config.weight is unset or a cast
  RealQuantized weight_codes;  // unpacked codes from the weight quantizer (config.weight set, not a cast)
  at::Tensor bias;       // float [out] (fake-quantized when the bias has a spec) or undefined
  std::optional<QuantParams> input_params;   // static input only
  std::optional<QuantParams> output_params;  // static output (KV cache) only
};

/// Packs and converts `data` into the tensors QuantizedLinearTensors lists, in that order, with the same dtypes
/// and shapes (checked: INTERNAL naming the tensor on a mismatch).
absl::StatusOr<std::vector<ExportTensor>> LinearExportTensors(const LinearExportData& data, PackMethod pack_method,
                                                              checkpoint::StDType model_dtype,
                                                              checkpoint::StDType float_scale_dtype);

/// The safetensors dtype of an ATen float dtype (F32 / F16 / BF16); INVALID_ARGUMENT for others.
absl::StatusOr<checkpoint::StDType> StDTypeOf(at::ScalarType dtype);
/// The ATen dtype of a float safetensors dtype.
absl::StatusOr<at::ScalarType> AtenFloatOf(checkpoint::StDType dtype);

/// Every linear and embedding module of a model from config.json alone (names and [out, in] shapes), as
/// ListModelModules gives for a float checkpoint; usable on an export, whose packed tensors have other shapes.
std::vector<ModuleInfo> ModulesFromConfig(const checkpoint::ModelConfig& config);

}  // namespace quark::exporter
