#include "core/runtime/mxfp4_expert_source.h"

#include <cstring>
#include <optional>

#include "core/base/strings.h"
#include "core/checkpoint/gpt_oss_config.h"
#include "core/checkpoint/gpt_oss_layout.h"

namespace quark::runtime {
namespace {

// OCP MX e2m1, as transformers' FP4_VALUES: codes 0-7 positive, 8-15 their negatives.
constexpr float kFp4Values[16] = {+0.0f, +0.5f, +1.0f, +1.5f, +2.0f, +3.0f, +4.0f, +6.0f,
                                  -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

std::string ShapeText(at::IntArrayRef shape) { return StrCat("[", StrJoin(shape.vec(), ", "), "]"); }

// A stored uint8 tensor copied into a CPU tensor: the whole of it, or its slice `index` along the first axis.
absl::StatusOr<at::Tensor> StoredBytes(const checkpoint::CheckpointReader& reader, const std::string& name,
                                       std::optional<int64_t> index = std::nullopt) {
  auto ref = reader.Get(name);
  if (!ref.ok()) return ref.status();
  if (ref->info->dtype != checkpoint::StDType::kU8) {
    return absl::InvalidArgumentError(StrCat("tensor \"", name, "\" is ", checkpoint::StDTypeName(ref->info->dtype),
                                             ", not the U8 of MXFP4 blocks and scales"));
  }
  std::string_view bytes = ref->bytes();
  std::vector<int64_t> shape = ref->info->shape;
  if (index) {
    if (shape.empty() || *index < 0 || *index >= shape[0]) {
      return absl::InvalidArgumentError(StrCat("tensor \"", name, "\" has no expert ", *index));
    }
    const size_t slice = bytes.size() / static_cast<size_t>(shape[0]);
    bytes = bytes.substr(static_cast<size_t>(*index) * slice, slice);
    shape.erase(shape.begin());
  }
  at::Tensor out = at::empty(shape, at::kByte);
  std::memcpy(out.data_ptr(), bytes.data(), bytes.size());
  return out;
}

}  // namespace

absl::StatusOr<at::Tensor> DequantizeMxfp4(const at::Tensor& blocks, const at::Tensor& scales, const std::string& name) {
  const bool shaped = blocks.dim() >= 3 && blocks.size(-1) == 16 && scales.dim() == blocks.dim() - 1 &&
                      scales.sizes() == blocks.sizes().slice(0, blocks.dim() - 1);
  if (blocks.scalar_type() != at::kByte || scales.scalar_type() != at::kByte || !shaped) {
    return absl::InvalidArgumentError(StrCat("MXFP4 tensor \"", name, "\": blocks ", ShapeText(blocks.sizes()),
                                             " and scales ", ShapeText(scales.sizes()),
                                             " are not uint8 [..., R, G, 16] and [..., R, G]"));
  }
  const at::Tensor lut = at::from_blob(const_cast<float*>(kFp4Values), {16}, at::kFloat);
  const at::Tensor low = lut.index({blocks.bitwise_and(0x0F).to(at::kLong)});   // [..., R, G, 16]
  const at::Tensor high = lut.index({blocks.bitwise_right_shift(4).to(at::kLong)});
  at::Tensor values = at::stack({low, high}, -1).flatten(-2);                    // [..., R, G, 32]: low nibble first
  const at::Tensor exponents = scales.to(at::kInt).sub(127).unsqueeze(-1);      // [..., R, G, 1]
  values = (values.to(at::kDouble) * at::pow(2.0, exponents.to(at::kDouble))).to(at::kFloat);  // exact: x * 2^e
  return values.flatten(-2).transpose(-1, -2).contiguous();                     // [..., G * 32, R]
}

Mxfp4ExpertSource::Mxfp4ExpertSource(std::shared_ptr<const checkpoint::CheckpointReader> reader)
    : reader_(reader), float_(std::move(reader)) {}

bool Mxfp4ExpertSource::IsPacked(const std::string& name) const {
  return !reader_->Has(name) && reader_->Has(name + "_blocks") && reader_->Has(name + "_scales");
}

bool Mxfp4ExpertSource::IsPackedExpert(const std::string& name) const {
  if (reader_->Has(name)) return false;
  const auto slice = checkpoint::GptOssExpertSliceOf(name);
  if (!slice) return false;
  if (slice->transposed) return IsPacked(slice->fused);
  const std::string weight = slice->fused.substr(0, slice->fused.size() - 5);  // "..._proj_bias" -> "..._proj"
  return IsPacked(weight) && reader_->Has(slice->fused);
}

bool Mxfp4ExpertSource::Has(const std::string& name) const {
  return IsPacked(name) || IsPackedExpert(name) || float_.Has(name);
}

absl::StatusOr<at::Tensor> Mxfp4ExpertSource::GetExpert(const std::string& name, at::ScalarType dtype) const {
  const checkpoint::GptOssExpertSlice slice = *checkpoint::GptOssExpertSliceOf(name);
  if (!slice.transposed) {  // a bias row of the float fused bias
    auto bias = float_.GetStored(slice.fused);
    if (!bias.ok()) return bias.status();
    if (slice.expert >= bias->size(0)) return absl::InvalidArgumentError(StrCat("tensor \"", slice.fused, "\" has no expert ", slice.expert));
    return bias->select(0, slice.expert).to(dtype);
  }
  auto blocks = StoredBytes(*reader_, slice.fused + "_blocks", slice.expert);
  if (!blocks.ok()) return blocks.status();
  auto scales = StoredBytes(*reader_, slice.fused + "_scales", slice.expert);
  if (!scales.ok()) return scales.status();
  auto values = DequantizeMxfp4(*blocks, *scales, slice.fused);  // [in, out]
  if (!values.ok()) return values.status();
  return values->t().contiguous().to(dtype);
}

absl::StatusOr<at::Tensor> Mxfp4ExpertSource::Get(const std::string& name, at::ScalarType dtype) const {
  if (IsPackedExpert(name)) return GetExpert(name, dtype);
  if (!IsPacked(name)) return float_.Get(name, dtype);
  auto blocks = StoredBytes(*reader_, name + "_blocks");
  if (!blocks.ok()) return blocks.status();
  auto scales = StoredBytes(*reader_, name + "_scales");
  if (!scales.ok()) return scales.status();
  auto values = DequantizeMxfp4(*blocks, *scales, name);
  if (!values.ok()) return values.status();
  return values->to(dtype);
}

bool GptOssFloatExpertSource::IsFusedExpert(const std::string& name) const {
  if (reader_->Has(name)) return false;
  const auto slice = checkpoint::GptOssExpertSliceOf(name);
  return slice && reader_->Has(slice->fused);
}

absl::StatusOr<at::Tensor> GptOssFloatExpertSource::GetStored(const std::string& name) const {
  if (!IsFusedExpert(name)) return float_.GetStored(name);
  const checkpoint::GptOssExpertSlice slice = *checkpoint::GptOssExpertSliceOf(name);
  auto fused = float_.GetStored(slice.fused);
  if (!fused.ok()) return fused.status();
  if (fused->dim() < 2 || slice.expert >= fused->size(0)) {
    return absl::InvalidArgumentError(StrCat("tensor \"", slice.fused, "\" of shape ", ShapeText(fused->sizes()),
                                             " has no expert ", slice.expert));
  }
  const at::Tensor part = fused->select(0, slice.expert);
  return slice.transposed ? part.t() : part;  // [in, out] -> [out, in]; a bias row as it is
}

absl::StatusOr<at::Tensor> GptOssFloatExpertSource::Get(const std::string& name, at::ScalarType dtype) const {
  if (!IsFusedExpert(name)) return float_.Get(name, dtype);
  auto part = GetStored(name);
  if (!part.ok()) return part.status();
  // One expert copied out of the mapped fused tensor into `dtype` (the layer's slice, gpt_oss_layer.cc, read alike).
  return at::empty(part->sizes(), part->options().dtype(dtype)).copy_(*part);
}

std::shared_ptr<const WeightSource> CheckpointWeightsFor(const checkpoint::ModelConfig& config,
                                                         std::shared_ptr<const checkpoint::CheckpointReader> reader) {
  if (config.gpt_oss && config.gpt_oss->mxfp4_experts) return std::make_shared<Mxfp4ExpertSource>(std::move(reader));
  if (config.gpt_oss) return std::make_shared<GptOssFloatExpertSource>(std::move(reader));
  return std::make_shared<CheckpointWeightSource>(std::move(reader));
}

}  // namespace quark::runtime
