#include "core/export/gguf_whole_file_plan.h"

#include <algorithm>

#include "core/base/strings.h"
#include "core/config/quant_types.h"

namespace quark::exporter::gguf {

absl::StatusOr<GgmlType> WholeFileGgufType(const FileType* file_type, std::optional<GgmlType> type, bool has_imatrix,
                                           const std::string& model_type) {
  if (has_imatrix) {
    return absl::InvalidArgumentError(
        StrCat("gguf_imatrix: the ", model_type, " GGUF export writes F32 or Q8_0, which take no importance matrix"));
  }
  const std::string name = file_type ? file_type->name : type ? FindType(*type)->name : "F32";
  if (name == "F32") return GgmlType::kF32;
  if (name == "Q8_0") return GgmlType::kQ8_0;
  // (MXFP4 experts come from the scheme, not from gguf_type: the experts the engine quantized to OCP MXFP4.)
  return absl::InvalidArgumentError(
      StrCat("gguf_type: \"", name, "\" is not supported for ", model_type, " (F32 or Q8_0)"));
}

GgmlType WholeFileTensorType(const std::vector<int64_t>& ne, GgmlType asked) {
  if (asked != GgmlType::kQ8_0 || ne.size() < 2 || ne[0] % kBlockSize != 0) return GgmlType::kF32;
  return GgmlType::kQ8_0;
}

void AddPlannedTensor(std::vector<TensorInfo>& out, std::string name, std::vector<int64_t> ne, GgmlType asked,
                      bool f32) {
  const GgmlType type = f32 || ne.size() == 1 ? GgmlType::kF32 : WholeFileTensorType(ne, asked);
  out.push_back({std::move(name), std::move(ne), type});
}

bool IsGgufMxfp4(const std::optional<QuantSpec>& spec) {
  return spec && spec->dtype == DType::kFp4 && spec->scale_format == ScaleFormat::kE8M0 &&
         spec->qscheme == QScheme::kPerGroup && spec->group_size.value_or(0) == kBlockSize &&
         (!spec->ch_axis || *spec->ch_axis == -1 || *spec->ch_axis == 1);
}

std::set<std::string> Mxfp4Modules(const LayerPlan& plan) {
  std::set<std::string> out;
  for (const LayerAssignment& a : plan.layers) {
    if (a.source != ConfigSource::kExcluded && !a.config.Empty() && IsGgufMxfp4(a.config.weight)) out.insert(a.module);
  }
  return out;
}

absl::StatusOr<bool> ExpertsMxfp4(const std::string& experts_prefix, int64_t num_experts, const std::string& proj,
                                  const std::set<std::string>& mxfp4_modules) {
  const bool first = mxfp4_modules.count(StrCat(experts_prefix, 0, ".", proj)) > 0;
  for (int64_t e = 1; e < num_experts; ++e) {
    if ((mxfp4_modules.count(StrCat(experts_prefix, e, ".", proj)) > 0) != first) {
      return absl::InvalidArgumentError(StrCat(experts_prefix, e, ".", proj, ": ", first ? "not " : "",
                                               "MXFP4 while expert 0 is", first ? "" : " not",
                                               ": llama.cpp holds a layer's experts in one tensor of one type; "
                                               "quantize them alike"));
    }
  }
  return first;
}

absl::Status CheckAgainstPlan(const std::string& family, const std::vector<TensorInfo>& written,
                              const std::vector<TensorInfo>& planned) {
  for (size_t k = 0; k < std::max(written.size(), planned.size()); ++k) {
    if (k >= written.size() || k >= planned.size() || written[k].name != planned[k].name ||
        written[k].ne != planned[k].ne || written[k].type != planned[k].type) {
      return absl::InvalidArgumentError(StrCat("gguf ", family, ": tensor ", k, " (\"",
                                               k < written.size() ? written[k].name : planned[k].name,
                                               "\") differs from what config.json implies"));
    }
  }
  return absl::OkStatus();
}

}  // namespace quark::exporter::gguf
