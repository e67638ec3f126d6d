// Writes a compressed-tensors export (formats-2026.md 2; `quant_method: "compressed-tensors"`, what llm-compressor
// writes and vLLM's compressed_tensors path loads) while the model streams, through the same staged, sharded
// safetensors folder as the HF-quark export: the per-linear tensors come from ct_layout.h, the quantization_config
// from ct_config.h, and CheckCompressedTensorsExport (ct_checker.h) runs before anything is published.
#pragma once

#include <memory>
#include <string>

#include "core/export/hf_quark_writer.h"

namespace quark::exporter {

class CompressedTensorsExporter : public HfQuarkExporter {
 public:
  /// As HfQuarkExporter::Create; a scheme compressed-tensors cannot express is refused here, before any work,
  /// naming the field (INVALID_ARGUMENT) or the format not written yet (UNIMPLEMENTED).
  static absl::StatusOr<std::unique_ptr<CompressedTensorsExporter>> Create(const std::string& model_dir,
                                                                           const std::string& output_dir,
                                                                           const Config& config, const LayerPlan& plan,
                                                                           HfQuarkExportOptions options = {});

  std::string_view format() const override { return "compressed_tensors"; }

 protected:
  absl::StatusOr<std::vector<ExportTensorSpec>> LinearTensors(const std::string& module, const LayerQuantConfig& config,
                                                              int64_t out, int64_t in, bool has_bias) const override;
  absl::StatusOr<std::vector<ExportTensor>> PackLinear(const LinearExportData& data) const override;
  absl::StatusOr<nlohmann::ordered_json> MakeQuantizationConfig(
      const LayerPlan& plan, const std::vector<std::string>& excluded) const override;
  absl::Status CheckExport(const std::string& dir) const override;

 private:
  CompressedTensorsExporter() = default;
  // #35 item 4: the rotation's R4 (ct_transform.h): the MLP width (0 without r4), the +-1 Hadamard in float32, and
  // the down_proj that stores it as `<module>.R4_input.weight` (the first decoder layer's; see CtR4MatrixOwner).
  int64_t r4_width_ = 0;
  at::Tensor r4_matrix_;
  std::string r4_owner_;
};

}  // namespace quark::exporter
