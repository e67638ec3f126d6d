#include "core/estimate/artifact_size.h"

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/checkpoint/model_layout.h"
#include "core/config/e8m0_tiles.h"  // #30
#include "core/export/gguf_arch_names.h"
#include "core/export/gguf_deepseek_plan.h"  // #37
#include "core/export/gguf_gpt_oss_plan.h"    // #32
#include "core/export/gguf_llama4_plan.h"     // #32
#include "core/export/gguf_whole_file_plan.h"
#include "core/export/gguf_moe.h"
#include "core/export/gguf_tensor_plan.h"

namespace quark::estimate {
namespace {

using checkpoint::StDType;

// safetensors header JSON per tensor: {"name":{"dtype":"BF16","shape":[a,b],"data_offsets":[x,y]}} is the name
// plus about 60 characters; the writer pads headers to 8 bytes. Only the headers are not exact.
constexpr uint64_t kHeaderBytesPerTensor = 64;

bool IsInt4(DType d) { return d == DType::kInt4 || d == DType::kUInt4; }

// Bits of one code in the packed weight.
uint64_t PackedBytes(DType element, uint64_t elements) {
  if (element == DType::kFp4 || IsInt4(element)) return elements / 2;
  if (element == DType::kFp6E3M2 || element == DType::kFp6E2M3) return elements * 3 / 4;
  if (element == DType::kInt3 || element == DType::kInt2) return elements;  // held in int8
  return elements;
}

uint64_t ActivationBytes(const std::optional<QuantSpec>& spec, int64_t channels) {
  if (!spec || spec->is_dynamic || IsCastType(spec->dtype) || spec->IsMx()) return 0;
  const uint64_t n = spec->qscheme == QScheme::kPerChannel ? channels : 1;
  const bool integer = IsIntegerType(spec->dtype);
  return n * 4 + (integer ? n : 0);
}

}  // namespace

std::string_view ExportKindName(ExportKind kind) {
  switch (kind) {
    case ExportKind::kHfQuark: return "hf_quark";
    case ExportKind::kGguf: return "gguf";
    case ExportKind::kOnnx: return "onnx";
    case ExportKind::kCompressedTensors: return "compressed_tensors";
  }
  return "?";
}

// Scales of a weight spec: one per tensor, channel or group.
uint64_t WeightScaleCount(const QuantSpec& w, int64_t out, int64_t in) {
  if (w.qscheme == QScheme::kPerChannel) {
    const int axis = w.ch_axis.value_or(0);
    return axis == 0 || axis == -2 ? out : in;
  }
  if (w.qscheme == QScheme::kPerGroup) {
    const int64_t group = w.group_size.value_or(-1) == -1 ? in : *w.group_size;
    return static_cast<uint64_t>(out) * (group > 0 ? in / group : 1);
  }
  return 1;
}

// Zero-point bytes HF-quark writes and compressed-tensors does not: all of them for symmetric integers (Quark writes
// zeros); for asymmetric int4, HF-quark's zero-point bytes less compressed-tensors' eight-per-int32 ones (none left
// per group or per channel, where both pack them).
uint64_t CtZeroPointSavings(const LayerQuantConfig& config, int64_t out, int64_t in) {
  if (!config.weight || IsCastType(config.weight->dtype) || config.weight->IsMx()) return 0;
  const QuantSpec& w = *config.weight;
  const DType element = w.ElementType();
  if (!IsIntegerType(element)) return 0;
  const uint64_t scales = WeightScaleCount(w, out, in);
  // #30: HF-quark packs int4 zero points eight per int32 per group and per channel (one int32 per tensor).
  const bool packed_int4 = IsInt4(element) && (w.qscheme == QScheme::kPerGroup || w.qscheme == QScheme::kPerChannel);
  const uint64_t quark = packed_int4 ? scales / 2 : scales * (IsInt4(element) ? 4 : 1);
  if (w.symmetric) return quark;
  return IsInt4(element) && !packed_int4 ? quark - scales / 2 : 0;
}

uint64_t HfQuarkLinearBytes(const LayerQuantConfig& config, int64_t out, int64_t in, bool has_bias,
                            StDType model_dtype) {
  const uint64_t elements = static_cast<uint64_t>(out) * in;
  const uint64_t float_bytes = checkpoint::StDTypeSize(model_dtype);
  uint64_t bytes = has_bias ? out * float_bytes : 0;
  bytes += ActivationBytes(config.input_tensors, in) + ActivationBytes(config.output_tensors, out);
  if (!config.weight) return bytes + elements * float_bytes;
  const QuantSpec& w = *config.weight;
  if (IsCastType(w.dtype)) return bytes + elements * 2;
  const DType element = w.ElementType();
  bytes += PackedBytes(element, elements);
  if (IsE8m0Tiles(w) && w.block_size.size() == 2 && w.block_size[0] > 0 && w.block_size[1] > 0) {  // #30
    return bytes + static_cast<uint64_t>(out / w.block_size[0]) * (in / w.block_size[1]);  // one E8M0 byte per tile
  }
  if (w.IsMx()) return bytes + static_cast<uint64_t>(out) * ((in + 31) / 32);
  if (w.IsNvfp4()) return bytes + elements / 16 + 4 + 4;  // float8 block scales, weight and input global scales
  // #30 W4A8: F32 weight_scale_2 per channel, weight_zero_point_2 eight per int32, the F32 fp8 weight_scale.
  if (w.IsProgressive()) return bytes + static_cast<uint64_t>(out) * 4 + static_cast<uint64_t>(out) / 2 + 4;
  const uint64_t scales = WeightScaleCount(w, out, in);
  if (IsInt4(element) && w.qscheme == QScheme::kPerGroup) {
    return bytes + scales * 2 + scales / 2;  // 16-bit scales; zero points eight per int32
  }
  bytes += scales * 4;
  if (IsInt4(element) && w.qscheme == QScheme::kPerChannel) return bytes + scales / 2;  // #30: eight per int32
  if (IsIntegerType(element)) bytes += scales * (IsInt4(element) ? 4 : 1);
  return bytes;
}

// The GGUF writer's plan of the model's tensors (their types), sized; the header as the other files' bytes (the
// vocabulary dominates it) and 64 bytes a tensor-table entry.
// The float weights' type of a whole-file family's GGUF (F32 or Q8_0), after what its exporter refuses in the plan
// (activations, KV cache, embeddings).
absl::StatusOr<exporter::gguf::GgmlType> WholeFileType(const ModelShape& model, const LayerPlan& plan,
                                                      const GgufArtifactOptions& options) {
  namespace gguf = exporter::gguf;
  for (const LayerAssignment& a : plan.layers) {
    if (a.source == ConfigSource::kExcluded || a.config.Empty()) continue;
    QUARK_RETURN_IF_ERROR(gguf::CheckGgufWeightsOnly(a, absl::StrCat(a.module, " (", a.SourceLabel(), ")")));
  }
  const gguf::FileType* file_type = nullptr;
  if (!options.type.empty()) {
    QUARK_ASSIGN_OR_RETURN(file_type, gguf::ParseFileType(options.type));
  }
  return gguf::WholeFileGgufType(file_type, std::nullopt, options.imatrix, model.config.model_type);
}

absl::StatusOr<GgufSize> PlannedGgufSize(const ModelShape& model, std::vector<exporter::gguf::TensorInfo> tensors) {
  GgufSize size;
  size.data_bytes = exporter::gguf::AssignOffsets(tensors);  // the writer's layout
  size.header_bytes = model.other_file_bytes + tensors.size() * kHeaderBytesPerTensor;
  return size;
}

// DeepSeek-V3's deepseek2 file (core/export/gguf_deepseek_plan.h): F32 or Q8_0 from the config alone; the engine's
// codes enter it dequantized, so the plan's schemes do not change its size.
absl::StatusOr<GgufSize> DeepseekGgufSize(const ModelShape& model, const LayerPlan& plan,
                                          const GgufArtifactOptions& options) {
  namespace gguf = exporter::gguf;
  QUARK_ASSIGN_OR_RETURN(const gguf::GgmlType type, WholeFileType(model, plan, options));
  QUARK_RETURN_IF_ERROR(gguf::CheckDeepseekGguf(*model.config.deepseek));
  QUARK_ASSIGN_OR_RETURN(std::vector<gguf::TensorInfo> tensors, gguf::PlanDeepseekGguf(*model.config.deepseek, type));
  return PlannedGgufSize(model, std::move(tensors));
}

// gpt-oss's and Llama 4's files (#32: core/export/gguf_gpt_oss_plan.h, gguf_llama4_plan.h): F32 or Q8_0, and the
// experts the plan quantizes to OCP MXFP4 as MXFP4; any other engine codes enter dequantized.
absl::StatusOr<GgufSize> WholeFileGgufSize(const ModelShape& model, const LayerPlan& plan,
                                           const GgufArtifactOptions& options) {
  namespace gguf = exporter::gguf;
  QUARK_ASSIGN_OR_RETURN(const gguf::GgmlType type, WholeFileType(model, plan, options));
  const std::set<std::string> mxfp4 = gguf::Mxfp4Modules(plan);
  std::vector<gguf::TensorInfo> tensors;
  if (model.config.gpt_oss) {
    QUARK_ASSIGN_OR_RETURN(tensors, gguf::PlanGptOssGguf(*model.config.gpt_oss, type, mxfp4));
  } else {
    QUARK_ASSIGN_OR_RETURN(tensors, gguf::PlanLlama4Gguf(*model.config.llama4, type, mxfp4));
  }
  return PlannedGgufSize(model, std::move(tensors));
}

absl::StatusOr<GgufSize> GgufArtifactSize(const ModelShape& model, const LayerPlan& plan,
                                           const GgufArtifactOptions& options) {
  namespace gguf = exporter::gguf;
  if (model.config.deepseek) return DeepseekGgufSize(model, plan, options);
  if (model.config.gpt_oss || model.config.llama4) return WholeFileGgufSize(model, plan, options);
  checkpoint::ModelConfig config = model.config;
  QUARK_ASSIGN_OR_RETURN(const std::string arch, gguf::GgufArchitecture(config));
  bool head_from_embedding = false;
  if (config.tie_word_embeddings && (options.untie_embeddings || gguf::RequiresOutputTensor(arch))) {
    config.tie_word_embeddings = false;
    head_from_embedding = true;
  }
  gguf::GgufTypeRequest request;
  if (!options.type.empty()) {
    QUARK_ASSIGN_OR_RETURN(request.file_type, gguf::ParseFileType(options.type));
    request.pure = options.pure;
  }
  request.has_imatrix = options.imatrix;
  std::map<std::string, StDType> dtypes;
  for (const TensorShape& t : model.tensors) dtypes[t.name] = t.dtype;
  auto source_dtype = [&](const std::string& hf_name) -> absl::StatusOr<StDType> {
    auto it = dtypes.find(hf_name);
    if (it == dtypes.end() && head_from_embedding && hf_name == "lm_head.weight") {
      it = dtypes.find(checkpoint::EmbedTokensName(config) + ".weight");
    }
    if (it == dtypes.end()) return absl::NotFoundError(absl::StrCat(hf_name, ": not in the model's safetensors"));
    return it->second;
  };
  QUARK_ASSIGN_OR_RETURN(const auto coded, gguf::CodedGgufTypes(plan));
  QUARK_ASSIGN_OR_RETURN(const auto tensors, gguf::PlanGgufTensors(config, coded, request, source_dtype));
  std::set<std::string> table;
  for (const gguf::PlannedGgufTensor& t : tensors) table.insert(t.info.name);
  GgufSize size;
  size.data_bytes = gguf::PlannedDataBytes(tensors);
  size.header_bytes = model.other_file_bytes + table.size() * kHeaderBytesPerTensor;
  return size;
}


absl::StatusOr<uint64_t> ArtifactBytes(const ModelShape& model, const LayerPlan& plan, ExportKind kind,
                                       const GgufArtifactOptions& gguf) {
  if (kind == ExportKind::kOnnx) return absl::UnimplementedError("onnx: the size of an ONNX export is not estimated");
  if (kind == ExportKind::kGguf) {
    QUARK_ASSIGN_OR_RETURN(const GgufSize size, GgufArtifactSize(model, plan, gguf));
    return size.data_bytes + size.header_bytes;
  }
  std::map<std::string, const LayerAssignment*> quantized;  // weight tensor name -> assignment
  for (const LayerAssignment& a : plan.layers) {
    // The exporters quantize the linears of decoder layers only (lm_head and embeddings stay float).
    if (a.source == ConfigSource::kExcluded || a.config.Empty() || a.module_type != "Linear") continue;
    if (LayerIndex(a.module) < 0) continue;
    quantized[a.module + ".weight"] = &a;
  }
  std::map<std::string, const TensorShape*> by_name;
  for (const TensorShape& t : model.tensors) by_name[t.name] = &t;
  uint64_t bytes = model.other_file_bytes;
  uint64_t tensors = 0;
  for (const TensorShape& t : model.tensors) {
    const std::string module = t.name.size() > 5 && t.name.compare(t.name.size() - 5, 5, ".bias") == 0 ? t.name.substr(0, t.name.size() - 5) : "";
    if (!module.empty() && quantized.count(module + ".weight")) continue;  // counted with its weight
    auto q = quantized.find(t.name);
    if (q == quantized.end()) {
      bytes += t.bytes;
      ++tensors;
      continue;
    }
    const std::string base = t.name.substr(0, t.name.size() - 7);
    const bool has_bias = by_name.count(base + ".bias") > 0;
    bytes += HfQuarkLinearBytes(q->second->config, t.shape[0], t.shape[1], has_bias, model.model_dtype);
    if (kind == ExportKind::kCompressedTensors) {
      bytes += 16 - CtZeroPointSavings(q->second->config, t.shape[0], t.shape[1]);  // + weight_shape int64 [2]
    }
    tensors += 4;
  }
  return bytes + tensors * kHeaderBytesPerTensor;
}

}  // namespace quark::estimate
