// Whether a job's exporters can lay out a model's quantized linears, from the model's shapes alone (no LibTorch):
// quarkd checks it at SubmitJob so that a scheme the exporters cannot pack for this model (uint4 per channel on a
// 172-column down_proj: eight codes a word) is refused there, naming the module, its shape and the rule, instead of
// failing on the worker after the whole quantization.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "core/config/layer_plan.h"
#include "core/estimate/artifact_size.h"
#include "core/estimate/model_shape.h"

namespace quark::estimate {

/// OK when every export of `kinds` can hold `plan` on `model`. hf_quark: the writer's own tensor plan
/// (core/export/hf_quark_tensor_plan.h) for each quantized linear of a decoder layer (the exporters keep lm_head and
/// embeddings float): int4/uint4 pack 8 codes a word along in_features (per_group: along out_features, the weight
/// is stored transposed), fp4 2, fp6 4, NVFP4 needs in_features % 16, per_block its tiling. gguf: the writer's
/// type plan (GgufArtifactSize's refusals). compressed_tensors packs with spill (any shape) and ONNX has no packing
/// rule here: not checked. INVALID_ARGUMENT "<format>: <module>.weight [out, in]: <rule>" for the first linear
/// that does not fit.
absl::Status CheckExportFit(const ModelShape& model, const LayerPlan& plan, const std::vector<ExportKind>& kinds,
                            const GgufArtifactOptions& gguf = {});

}  // namespace quark::estimate
