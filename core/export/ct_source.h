// Reads a compressed-tensors export back (#30 item 2): config.json's quantization_config through the config_groups
// reader (ct_read_config.h) and every quantized linear's tensors through its format family's unpack (ct_families.h),
// dequantized by the engine's numerics, so that `quark eval DIR` and the pipeline's read-back evaluate it as they
// evaluate an HF-quark export (quantize/reload.h installs the same activation quantizers).
//
// Exactness: the weights equal the fake-quantized model's bit for bit for every format but NVFP4. NVFP4's global
// scale is stored as compressed-tensors' divisor, the float32 reciprocal of the engine's multiplier, and a float32
// reciprocal does not always round-trip (about a quarter of the divisors have two float32 preimages): the reader
// picks one (CtGlobalScaleFromDivisor), the engine's scale or its float32 neighbour, so an NVFP4 weight may differ
// from the fake-quantized one by an ulp of the product, and an activation's global scale by one ulp.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "core/export/hf_quark_source.h"

namespace quark::exporter {

/// quantization_config.quant_method of `dir`/config.json ("quark", "compressed-tensors"); "" when the folder has no
/// readable config.json or no quantization_config.
std::string ExportQuantMethod(const std::string& dir);

/// The engine's NVFP4 global scale (the multiplier fl(amax / 2688)) of a stored compressed-tensors divisor `divisor`
/// (float32): among the float32 g whose float32 reciprocal is `divisor`, the one fl(a / 2688) can give for a float32
/// a when exactly one can, else the one nearest 1 / divisor (fl(1 / divisor) when it round-trips).
float CtGlobalScaleFromDivisor(float divisor);

class CtWeightSource : public HfQuarkWeightSource {
 public:
  /// Opens an export folder whose config.json has `quant_method: "compressed-tensors"`. Errors name the file and the
  /// key (ConfigFromCompressedTensors), UNIMPLEMENTED for an MoE model (no compressed-tensors MoE export is read).
  static absl::StatusOr<std::shared_ptr<CtWeightSource>> Open(const std::string& dir,
                                                              at::ScalarType compute_dtype = at::kFloat);

  /// #35 item 4: the matrix of the online input transform that quantization_config.transform_config puts on linear
  /// `module` (the stored `<module>.<scheme>_input.weight`, [in, in], as float64; the runtime divides by sqrt(n) as
  /// the library and vLLM do), undefined when none targets it.
  absl::StatusOr<at::Tensor> InputTransform(const std::string& module) const;

 protected:
  /// The stored tensors of `module` (names, shapes and dtypes checked against CtLinearTensors), unpacked by the
  /// format's family and dequantized. INVALID_ARGUMENT / NOT_FOUND naming the tensor.
  absl::StatusOr<at::Tensor> Dequantized(const std::string& module, const QuantSpec& spec,
                                         at::ScalarType dtype) const override;
  /// input_scale / input_zero_point [1], NVFP4's input_global_scale (a divisor), the KV cache's k_proj / v_proj
  /// output_scale (or the attention's k_scale / v_scale, as newer llm-compressor writes them).
  absl::StatusOr<std::optional<QuantParams>> StaticParams(const std::string& module,
                                                          const std::optional<QuantSpec>& spec,
                                                          const char* prefix) const override;

 private:
  using HfQuarkWeightSource::HfQuarkWeightSource;
  absl::StatusOr<at::Tensor> Stored(const std::string& name) const;

  std::map<std::string, std::pair<int64_t, int64_t>> linear_shapes_;  // module -> (out, in)
  std::map<std::string, std::string> input_transforms_;  // module -> its transform matrix's tensor name
};

}  // namespace quark::exporter
