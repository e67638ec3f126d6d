// The weights GPTQ gives routed experts streamed in groups (#32 item 5), kept on disk while their expert is not
// resident: the streamer reads them in place of the checkpoint's (runtime::ExpertStreamingWeights' `replaced`), so
// an expert evicted after its GPTQ loads again as GPTQ left it, for the calibration, export and evaluation passes.
//
// Holding them in memory would undo the streaming: a DeepSeek-V3 layer's 256 experts are 11.3B weights. GPTQ's
// weights lie on their quantization grid, so each is kept as its codes and parameters (grid_weights.h's
// ExactGridCodes, packed as the export packs them: int4 eight to a word, an eighth of float32) when Dequantize gives
// it back bit for bit, else as float32.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"
#include "core/numerics/quant_params.h"
#include "core/quantize/scratch_folder.h"
#include "core/runtime/weight_source.h"

namespace quark::quantize {

/// One file per tensor in a scratch folder it owns (removed with it). Not thread-safe: Put and the reads come from
/// the layer's one thread.
class ExpertWeightSpill : public runtime::WeightSource {
 public:
  /// A new folder under `parent` (empty = the system's temporary directory). INTERNAL naming the path on failure.
  static absl::StatusOr<std::shared_ptr<ExpertWeightSpill>> Create(const std::string& parent = "");
  ExpertWeightSpill(const ExpertWeightSpill&) = delete;
  ExpertWeightSpill& operator=(const ExpertWeightSpill&) = delete;

  /// Keeps `weight` (any device, float) as the tensor `name`, replacing an earlier one. With `spec` and `params` (the
  /// weight's quantization) it is kept as codes when they reproduce it bit for bit. A disk error names the file.
  absl::Status Put(const std::string& name, const at::Tensor& weight, const QuantSpec* spec,
                   const QuantParams* params);

  absl::StatusOr<at::Tensor> Get(const std::string& name, at::ScalarType dtype) const override;
  /// In the dtype it was put in.
  absl::StatusOr<at::Tensor> GetStored(const std::string& name) const override;
  bool Has(const std::string& name) const override { return entries_.count(name) > 0; }
  std::string Location() const override { return folder_->path() + " (GPTQ's weights of streamed experts)"; }

  /// Tensors kept, those kept as codes, and the bytes of their files.
  int64_t tensors() const { return static_cast<int64_t>(entries_.size()); }
  int64_t grid_tensors() const;
  int64_t bytes() const { return bytes_; }

 private:
  struct Field {
    at::ScalarType dtype;
    std::vector<int64_t> shape;
    int64_t offset = 0;
  };
  struct Entry {
    std::string file;
    at::ScalarType dtype;           // the weight's, as put
    std::optional<QuantSpec> spec;  // set: fields are codes, scale, zero_point, global_scale; else one float32 field
    std::vector<Field> fields;
    bool packed = false;  // the fields are PackForExport's (packing.h), not QuantizeReal's
    int64_t bytes = 0;
  };
  explicit ExpertWeightSpill(std::unique_ptr<ScratchFolder> folder) : folder_(std::move(folder)) {}
  absl::StatusOr<std::vector<at::Tensor>> ReadFields(const Entry& entry) const;

  std::unique_ptr<ScratchFolder> folder_;
  std::map<std::string, Entry> entries_;
  int64_t next_file_ = 0;
  int64_t bytes_ = 0;
};

}  // namespace quark::quantize
