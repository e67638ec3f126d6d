// Internal to the compressed-tensors layout (ct_layout.cc): one row per compression format family, each in its own
// file. A family lists the weight's tensors of one linear (names, dtypes, shapes) and makes them from the engine's
// real-quantized codes, in the same order.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checkpoint/dtype.h"
#include "core/config/quant_spec.h"
#include "core/export/hf_quark_layout.h"
#include "core/numerics/real_quant.h"

namespace quark::exporter {

/// A stored tensor of the linear being read back, by its suffix ("weight_packed", "weight_scale", ...), in its
/// safetensors dtype (float8 as uint8 bytes); NOT_FOUND naming the tensor when the export lacks it.
using CtStoredTensor = std::function<absl::StatusOr<at::Tensor>(const std::string& suffix)>;

struct CtFamily {
  /// The compression format names this family writes ("pack-quantized", ...).
  std::vector<std::string_view> formats;
  /// Appends the weight's tensors of module `m` ([out, in]) to `t`; errors name the module, the shape and the rule.
  absl::Status (*specs)(const std::string& m, const QuantSpec& w, int64_t out, int64_t in,
                        checkpoint::StDType scale_dtype, std::vector<ExportTensorSpec>& t);
  /// The values of those tensors, in the same order, from the unpacked codes `q` (any dtype; the caller casts).
  absl::StatusOr<std::vector<at::Tensor>> (*values)(const RealQuantized& q, const QuantSpec& w, int64_t out,
                                                    int64_t in);
  /// The inverse, for the reader (ct_source.h), under the spec the reader gives `w` (integer grids signed: unsigned
  /// schemes are stored shifted to signed ones): the codes in [out, in] (int8 values; uint8 bit patterns for floats),
  /// scale and zero point in compressed-tensors' shapes (the caller reshapes them to the numerics' parameter shape),
  /// NVFP4's global scale as stored (the divisor). Errors name the tensor and the rule.
  absl::StatusOr<RealQuantized> (*unpack)(const CtStoredTensor& get, const QuantSpec& w, int64_t out, int64_t in);
};

/// The family writing `format`; nullptr when none does.
const CtFamily* FindCtFamily(std::string_view format);

extern const CtFamily kCtPackQuantized;   // ct_pack_quantized.cc
extern const CtFamily kCtNaiveQuantized;  // ct_naive_quantized.cc: int-quantized, float-quantized
extern const CtFamily kCtNvfp4;           // ct_nvfp4.cc
extern const CtFamily kCtMx;              // ct_mx.cc: mxfp4-pack-quantized, mxfp8-quantized (#30 item 4)

/// compressed-tensors' scale shape of a weight spec: tensor (1), channel (out, 1), group (out, in / G),
/// block (out / rows, in / cols). INVALID_ARGUMENT naming the module when G or the block does not divide.
absl::StatusOr<std::vector<int64_t>> CtWeightScaleShape(const std::string& m, const QuantSpec& w, int64_t out,
                                                        int64_t in);

/// Codes and zero points of an unsigned integer spec moved to compressed-tensors' signed range (u - 2^(b-1));
/// signed ones unchanged. int32 result.
at::Tensor CtSignedCodes(const at::Tensor& codes, DType element);

}  // namespace quark::exporter
