// Writes Quark's HF export (checkpoint-format.md) while the model streams: every tensor is planned up front (the
// source's unquantized tensors as they are, each quantized linear per its scheme), each finished layer's tensors
// are written as the layer finishes, and nothing is kept in memory. The folder is built as `<output>.partial`,
// checked against the consumer rules (CheckHfQuarkExport) and only then renamed to `<output>`.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/checkpoint_writer.h"
#include "core/checkpoint/model_config.h"
#include "core/config/layer_plan.h"
#include "core/export/hf_quark_layout.h"
#include "core/export/model_exporter.h"

namespace quark::exporter {

struct HfQuarkExportOptions {
  /// Shards above this size (HF's rule), with model.safetensors.index.json.
  uint64_t max_shard_bytes = 5ull << 30;
  /// The dtype activations and scales are computed in (decides the dtype of per-group int4 scales).
  at::ScalarType compute_dtype = at::kFloat;
  /// The export carries its own lm_head.weight and says tie_word_embeddings: false (a rotation made the embedding
  /// and the LM head different matrices). WriteUnquantized takes lm_head.weight from its `weights`.
  bool untie_embeddings = false;
};

class HfQuarkExporter : public ModelExporter {
 public:
  /// Plans the export of `model_dir` quantized by `config` / `plan`. Errors before any byte is written:
  /// INVALID_ARGUMENT naming the module for a scheme that cannot be packed for its shape, UNIMPLEMENTED for a
  /// quantized embedding or lm_head (add it to exclude), ALREADY_EXISTS when `output_dir` is a non-empty folder.
  static absl::StatusOr<std::unique_ptr<HfQuarkExporter>> Create(const std::string& model_dir,
                                                                const std::string& output_dir, const Config& config,
                                                                const LayerPlan& plan, HfQuarkExportOptions options = {});
  ~HfQuarkExporter() override;

  std::string_view format() const override { return "hf_quark"; }
  /// Writes one quantized linear's tensors (the module must be one the plan quantizes).
  absl::Status WriteLinear(const LinearExportData& data) override;
  /// Writes the source tensors whose names start with `prefix` and that are not quantized linears (norms, excluded
  /// linears, embeddings) with `weights`' values in the checkpoint's dtype (bytes unchanged when the algorithms left
  /// them alone); "" writes every one not yet written.
  absl::Status WriteUnquantized(const std::string& prefix, const runtime::WeightSource& weights) override;
  /// Writes what is left, finishes the shards, writes config.json (with quantization_config) and the other files
  /// of the model folder, checks the consumer rules and publishes. Returns the file names written.
  absl::StatusOr<std::vector<std::string>> Finish(const runtime::WeightSource& weights) override;

  /// The quantization_config written into config.json (exclude expanded to exact names).
  const nlohmann::ordered_json& quantization_config() const { return quantization_config_; }
  checkpoint::StDType model_dtype() const { return model_dtype_; }
  /// The dtype of per-group int4 weight scales for `spec` (see QuantizedLinearTensors).
  checkpoint::StDType FloatScaleDType(const LayerQuantConfig& config) const;

 protected:
  // The streamed safetensors folder (planning, copies of the unquantized tensors, config.json and the model's other
  // files, staging and publishing) is shared with the other HF-style layouts (compressed-tensors, ct_writer.h), which
  // replace the per-linear tensors, the quantization_config and the consumer check.
  HfQuarkExporter() = default;
  /// Opens the model, plans every tensor and creates the staging writer; Create calls it on a fresh exporter.
  absl::Status Init(const std::string& model_dir, const std::string& output_dir, const Config& config,
                    const LayerPlan& plan, HfQuarkExportOptions options);
  virtual absl::StatusOr<std::vector<ExportTensorSpec>> LinearTensors(const std::string& module,
                                                                      const LayerQuantConfig& config, int64_t out,
                                                                      int64_t in, bool has_bias) const;
  virtual absl::StatusOr<std::vector<ExportTensor>> PackLinear(const LinearExportData& data) const;
  /// The quantization_config of config.json; `excluded` are the exact names of the linears left in float.
  virtual absl::StatusOr<nlohmann::ordered_json> MakeQuantizationConfig(const LayerPlan& plan,
                                                                        const std::vector<std::string>& excluded) const;
  virtual absl::Status CheckExport(const std::string& dir) const;
  const Config& config() const { return config_; }

 private:
  absl::Status PlanTensors(const LayerPlan& plan, std::vector<checkpoint::PlannedTensor>& planned);
  absl::Status WriteConfigAndFiles() const;

  std::string model_dir_, output_dir_, staging_dir_;
  HfQuarkExportOptions options_;
  Config config_;
  checkpoint::ModelConfig model_;
  checkpoint::StDType model_dtype_ = checkpoint::StDType::kF32;
  std::unique_ptr<checkpoint::CheckpointReader> reader_;
  std::unique_ptr<checkpoint::CheckpointWriter> writer_;
  nlohmann::ordered_json quantization_config_;
  std::set<std::string> quantized_modules_;
  std::set<std::string> pending_copies_;  // source tensor names still to copy
  bool published_ = false;
};

}  // namespace quark::exporter
