// gpt-oss checkpoints as OpenAI ships them: the experts in MXFP4 (quantization_config {"quant_method": "mxfp4"}),
// stored as mlp.experts.{gate_up,down}_proj_blocks [E, out, in / 32, 16] (uint8: two e2m1 codes per byte, the low
// nibble first) and _scales [E, out, in / 32] (uint8 e8m0 exponents, bias 127), everything else in bf16. This source
// serves mlp.experts.gate_up_proj / down_proj in HF's float layout [E, in, out] by dequantizing them as transformers'
// integrations/mxfp4.py convert_moe_packed_tensors does (FP4_VALUES[code] * 2^(scale - 127), then the transpose), and
// passes every other tensor to the checkpoint's own source. Every MXFP4 value is exact in float32. It also serves each
// expert's own linears, mlp.experts.E.{gate_up,down}_proj.{weight [out, in], bias} (gpt_oss_layout.h), dequantizing
// only that expert's blocks: what the gpt-oss layer loads, so a layer never holds a whole fused float tensor.
#pragma once

#include <memory>
#include <string>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/model_config.h"
#include "core/runtime/weight_source.h"

namespace quark::runtime {

/// Dequantizes one MXFP4 pair: blocks [..., R, G, 16] uint8 and scales [..., R, G] uint8 -> float32 [..., G * 32, R]
/// (the last two axes swapped, as HF's convert_moe_packed_tensors returns them). InvalidArgument naming `name` and both
/// shapes when they disagree, or for other dtypes.
absl::StatusOr<at::Tensor> DequantizeMxfp4(const at::Tensor& blocks, const at::Tensor& scales, const std::string& name);

class Mxfp4ExpertSource : public WeightSource {
 public:
  explicit Mxfp4ExpertSource(std::shared_ptr<const checkpoint::CheckpointReader> reader);
  absl::StatusOr<at::Tensor> Get(const std::string& name, at::ScalarType dtype) const override;
  bool Has(const std::string& name) const override;
  void Prefetch(const std::string& prefix) const override { float_.Prefetch(prefix); }
  std::string Location() const override { return float_.Location(); }

 private:
  // Whether `name` is served from `name`_blocks / `name`_scales (stored, and `name` itself is not).
  bool IsPacked(const std::string& name) const;
  // Whether `name` is one expert's weight or bias of a packed fused tensor (and not stored itself).
  bool IsPackedExpert(const std::string& name) const;
  absl::StatusOr<at::Tensor> GetExpert(const std::string& name, at::ScalarType dtype) const;
  std::shared_ptr<const checkpoint::CheckpointReader> reader_;
  CheckpointWeightSource float_;
};

/// A gpt-oss checkpoint with float fused experts (HF's bf16 release, make-model): also serves each expert's own
/// linears, mlp.experts.E.{gate_up,down}_proj.{weight [out, in], bias}, as the slice of the fused tensor (GetStored: a
/// view where it is stored; Get: that expert copied into the dtype), as Mxfp4ExpertSource does for MXFP4. What lets
/// a routed expert stream in groups (expert_streaming.h: one expert read at a time, by its own name).
class GptOssFloatExpertSource : public WeightSource {
 public:
  explicit GptOssFloatExpertSource(std::shared_ptr<const checkpoint::CheckpointReader> reader)
      : reader_(reader), float_(std::move(reader)) {}
  absl::StatusOr<at::Tensor> Get(const std::string& name, at::ScalarType dtype) const override;
  absl::StatusOr<at::Tensor> GetStored(const std::string& name) const override;
  bool Has(const std::string& name) const override { return float_.Has(name) || IsFusedExpert(name); }
  void Prefetch(const std::string& prefix) const override { float_.Prefetch(prefix); }
  std::string Location() const override { return float_.Location(); }

 private:
  // Whether `name` is one expert's weight or bias of a stored float fused tensor (and not stored itself).
  bool IsFusedExpert(const std::string& name) const;
  std::shared_ptr<const checkpoint::CheckpointReader> reader_;
  CheckpointWeightSource float_;
};

/// The source a checkpoint folder's weights are read through for `config`: an Mxfp4ExpertSource for a gpt-oss whose
/// config says its experts are MXFP4 (OpenAI's release), a GptOssFloatExpertSource for another gpt-oss, else a plain
/// CheckpointWeightSource.
std::shared_ptr<const WeightSource> CheckpointWeightsFor(const checkpoint::ModelConfig& config,
                                                         std::shared_ptr<const checkpoint::CheckpointReader> reader);

}  // namespace quark::runtime
