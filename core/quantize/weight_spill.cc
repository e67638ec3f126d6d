#include "core/quantize/weight_spill.h"

#include <filesystem>

#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/checkpoint/checkpoint_writer.h"

namespace quark::quantize {

namespace fs = std::filesystem;

const runtime::WeightSource* OverlayWeightSource::Find(const std::string& name) const {
  for (const auto& source : overlay_) {
    if (source->Has(name)) return source.get();
  }
  return base_.get();
}

absl::StatusOr<at::Tensor> OverlayWeightSource::Get(const std::string& name, at::ScalarType dtype) const {
  return Find(name)->Get(name, dtype);
}

absl::StatusOr<at::Tensor> OverlayWeightSource::GetStored(const std::string& name) const {
  return Find(name)->GetStored(name);
}

bool OverlayWeightSource::Has(const std::string& name) const { return Find(name)->Has(name); }

absl::StatusOr<std::unique_ptr<WeightSpill>> WeightSpill::Create(const std::string& parent) {
  QUARK_ASSIGN_OR_RETURN(std::unique_ptr<ScratchFolder> folder, ScratchFolder::Create(parent, "quark-spill"));
  return std::unique_ptr<WeightSpill>(new WeightSpill(std::move(folder)));
}

absl::Status WeightSpill::WriteLayer(int64_t index, const std::vector<std::pair<std::string, at::Tensor>>& tensors) {
  std::vector<checkpoint::PlannedTensor> plan;
  std::vector<at::Tensor> contiguous;
  for (const auto& [name, tensor] : tensors) {
    contiguous.push_back(tensor.to(at::kCPU, at::kFloat).contiguous());  // the spill is host storage
    plan.push_back({name, checkpoint::StDType::kF32, tensor.sizes().vec()});
  }
  const std::string dir = (fs::path(folder_->path()) / StrCat("layer-", index)).string();
  QUARK_ASSIGN_OR_RETURN(auto writer, checkpoint::CheckpointWriter::Create(dir, plan));
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& c = contiguous[i];
    QUARK_RETURN_IF_ERROR(writer->Write(tensors[i].first, {static_cast<const char*>(c.data_ptr()), c.nbytes()}));
  }
  QUARK_RETURN_IF_ERROR(writer->Finish());
  layers_.push_back((fs::path(dir) / "model.safetensors").string());
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const runtime::WeightSource>> WeightSpill::Overlay(
    std::shared_ptr<const runtime::WeightSource> base) const {
  std::vector<std::shared_ptr<const runtime::WeightSource>> overlay;
  for (const std::string& file : layers_) {
    QUARK_ASSIGN_OR_RETURN(auto reader, checkpoint::CheckpointReader::OpenFile(file));
    overlay.push_back(std::make_shared<runtime::CheckpointWeightSource>(
        std::shared_ptr<const checkpoint::CheckpointReader>(std::move(reader))));
  }
  return std::shared_ptr<const runtime::WeightSource>(
      std::make_shared<OverlayWeightSource>(std::move(base), std::move(overlay)));
}

}  // namespace quark::quantize
