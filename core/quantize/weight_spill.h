// Weights an algorithm replaced (GPTQ), kept on disk one layer at a time, so that a later pass over the model (the
// fake-quantized evaluation) reads them in place of the checkpoint's without holding the model in memory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/checkpoint/checkpoint_reader.h"
#include "core/quantize/scratch_folder.h"
#include "core/runtime/weight_source.h"

namespace quark::quantize {

/// A WeightSource whose `overlay` tensors replace `base`'s of the same name.
class OverlayWeightSource : public runtime::WeightSource {
 public:
  OverlayWeightSource(std::shared_ptr<const runtime::WeightSource> base,
                      std::vector<std::shared_ptr<const runtime::WeightSource>> overlay)
      : base_(std::move(base)), overlay_(std::move(overlay)) {}
  absl::StatusOr<at::Tensor> Get(const std::string& name, at::ScalarType dtype) const override;
  absl::StatusOr<at::Tensor> GetStored(const std::string& name) const override;
  bool Has(const std::string& name) const override;
  void Prefetch(const std::string& prefix) const override { base_->Prefetch(prefix); }
  std::string Location() const override { return base_->Location() + " (with algorithm weights)"; }

 private:
  const runtime::WeightSource* Find(const std::string& name) const;
  std::shared_ptr<const runtime::WeightSource> base_;
  std::vector<std::shared_ptr<const runtime::WeightSource>> overlay_;
};

/// Owns a scratch folder (removed with it) holding one safetensors file per written layer. Not thread-safe.
class WeightSpill {
 public:
  /// A new folder under `parent` (empty = the system's temporary directory). INTERNAL naming the path on failure.
  static absl::StatusOr<std::unique_ptr<WeightSpill>> Create(const std::string& parent = "");
  WeightSpill(const WeightSpill&) = delete;
  WeightSpill& operator=(const WeightSpill&) = delete;

  /// Writes the tensors (full HF names, float) of layer `index`; a disk error names the file.
  absl::Status WriteLayer(int64_t index, const std::vector<std::pair<std::string, at::Tensor>>& tensors);
  bool empty() const { return layers_.empty(); }
  /// `base` with every spilled tensor in place of its own.
  absl::StatusOr<std::shared_ptr<const runtime::WeightSource>> Overlay(
      std::shared_ptr<const runtime::WeightSource> base) const;

 private:
  explicit WeightSpill(std::unique_ptr<ScratchFolder> folder) : folder_(std::move(folder)) {}
  std::unique_ptr<ScratchFolder> folder_;
  std::vector<std::string> layers_;  // files written
};

}  // namespace quark::quantize
