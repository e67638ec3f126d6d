// The rules the whole-file GGUF families (deepseek2 aside: gguf_deepseek_plan.h; gpt-oss, llama4) share, from the
// config and the layer plan alone, without LibTorch: the writers (gguf_whole_file.h) and the estimator's artifact sizes
// (core/estimate/artifact_size.cc) both decide by them.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/config/layer_plan.h"
#include "core/config/quant_spec.h"
#include "core/export/gguf_blocks.h"
#include "core/export/gguf_file.h"
#include "core/export/gguf_mixture.h"

namespace quark::exporter::gguf {

/// The type of a whole-file family's float weights from the export's options: F32 unless asked otherwise, Q8_0 the only
/// other type; INVALID_ARGUMENT naming gguf_type for another type (naming `model_type`) and gguf_imatrix for an
/// importance matrix (neither type takes one).
absl::StatusOr<GgmlType> WholeFileGgufType(const FileType* file_type, std::optional<GgmlType> type, bool has_imatrix,
                                           const std::string& model_type);

/// Q8_0 where `asked` is Q8_0 and the rows (ne[0]) are a multiple of 32, for 2-D and 3-D weights; F32 otherwise (and
/// for 1-D tensors): the deepseek2, gpt-oss and llama4 writers' rule, as llama-quantize's Q8_0 keeps short rows.
GgmlType WholeFileTensorType(const std::vector<int64_t>& ne, GgmlType asked);

/// Appends tensor `name` (ggml shape `ne`) to a plan, typed by WholeFileTensorType(ne, asked), or F32 when `f32` (the
/// router) or 1-D.
void AddPlannedTensor(std::vector<TensorInfo>& out, std::string name, std::vector<int64_t> ne, GgmlType asked,
                      bool f32 = false);

/// Whether `spec` is OCP MXFP4 as GGML_TYPE_MXFP4 holds it: fp4 (E2M1) in groups of 32 along the input, E8M0 scales.
bool IsGgufMxfp4(const std::optional<QuantSpec>& spec);

/// The linears `plan` quantizes to OCP MXFP4 (IsGgufMxfp4 weights): those a family may write as GGML MXFP4.
std::set<std::string> Mxfp4Modules(const LayerPlan& plan);

/// Whether the routed experts `experts_prefix`E.`proj` (E < num_experts; "model.layers.3.mlp.experts.", "down_proj")
/// go into the file as MXFP4: all of them named in `mxfp4_modules`, or none (false). INVALID_ARGUMENT naming the first
/// expert that differs from expert 0: llama.cpp holds a layer's experts in one tensor of one type.
absl::StatusOr<bool> ExpertsMxfp4(const std::string& experts_prefix, int64_t num_experts, const std::string& proj,
                                  const std::set<std::string>& mxfp4_modules);

/// INVALID_ARGUMENT naming the first entry of `written` (the tensors a writer built: name, ne, type) that differs from
/// `planned` (what config.json implies), in `family`'s messages.
absl::Status CheckAgainstPlan(const std::string& family, const std::vector<TensorInfo>& written,
                              const std::vector<TensorInfo>& planned);

}  // namespace quark::exporter::gguf
