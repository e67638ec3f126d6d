#include "core/export/gguf_tensor_plan.h"

#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/checkpoint/model_layout.h"
#include "core/export/gguf_arch_names.h"
#include "core/export/gguf_gemma.h"
#include "core/export/gguf_moe.h"

namespace quark::exporter::gguf {

absl::StatusOr<GgmlType> GgufTypeForScheme(const std::string& module, const QuantSpec& w) {
  const std::string why = StrCat(module, ": weight ", Name(w.dtype), " ", Name(w.qscheme),
                                 w.group_size ? StrCat(" group_size ", *w.group_size) : std::string(), " ",
                                 w.symmetric ? "symmetric" : "asymmetric",
                                 " cannot be held by GGUF (uint4 asymmetric, int4 symmetric or int8 symmetric per "
                                 "group of 32 along the input: Q4_1, Q4_0, Q8_0)");
  const bool group32 = w.qscheme == QScheme::kPerGroup && w.group_size && *w.group_size == kBlockSize &&
                       (!w.ch_axis || *w.ch_axis == -1 || *w.ch_axis == 1) && !w.IsMx();
  if (!group32) return absl::InvalidArgumentError(why);
  if (w.dtype == DType::kUInt4 && !w.symmetric) return GgmlType::kQ4_1;
  if (w.dtype == DType::kInt4 && w.symmetric) return GgmlType::kQ4_0;
  if (w.dtype == DType::kInt8 && w.symmetric) return GgmlType::kQ8_0;
  return absl::InvalidArgumentError(why);
}

absl::Status CheckGgufWeightsOnly(const LayerAssignment& a, const std::string& where) {
  if (a.module_type != "Linear" || a.module.rfind("model.layers.", 0) != 0) {
    return absl::InvalidArgumentError(StrCat(where, ": GGUF export quantizes only the linears of decoder layers; "
                                                    "add it to exclude or give --gguf-type for it"));
  }
  if (a.config.input_tensors || a.config.output_tensors) {
    return absl::InvalidArgumentError(StrCat(where, ": ", a.config.input_tensors ? "input_tensors" : "output_tensors",
                                             " quantization cannot be held by GGUF (llama.cpp stores weights only)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::map<std::string, GgmlType>> CodedGgufTypes(const LayerPlan& plan) {
  std::map<std::string, GgmlType> coded;
  for (const LayerAssignment& a : plan.layers) {
    if (a.source == ConfigSource::kExcluded || a.config.Empty()) continue;
    // MoE routers: the engine never quantizes them (not linears of the layer) and llama.cpp reads them in F32.
    if (KeptInF32(GgufTensorName(a.module + ".weight"))) continue;
    const std::string where = StrCat(a.module, " (", a.SourceLabel(), ")");
    QUARK_RETURN_IF_ERROR(CheckGgufWeightsOnly(a, where));
    if (a.config.weight && !IsCastType(a.config.weight->dtype)) {
      QUARK_ASSIGN_OR_RETURN(coded[a.module], GgufTypeForScheme(where, *a.config.weight));
    }
  }
  return coded;
}

absl::StatusOr<std::vector<PlannedGgufTensor>> PlanGgufTensors(const checkpoint::ModelConfig& config,
                                                               const std::map<std::string, GgmlType>& coded,
                                                               const GgufTypeRequest& request,
                                                               const SourceDtypeOf& source_dtype) {
  MixtureModel mixture;
  mixture.n_layer = static_cast<int>(config.num_hidden_layers);
  mixture.n_head = static_cast<int>(config.num_attention_heads);
  mixture.n_head_kv = static_cast<int>(config.num_key_value_heads);
  mixture.n_expert = static_cast<int>(config.num_experts);
  mixture.tied_embeddings = config.tie_word_embeddings;  // no output.weight in the file
  std::vector<PlannedGgufTensor> tensors;
  for (const checkpoint::TensorSpec& spec : checkpoint::ModelTensors(config)) {
    PlannedGgufTensor t;
    t.hf_name = spec.name;
    const GgufSlot slot = GgufTensorSlot(spec.name);
    t.info.name = slot.name;
    if (std::string gemma = GemmaGgufTensorName(config, spec.name); !gemma.empty()) t.info.name = std::move(gemma);
    t.expert = slot.expert;
    if (t.info.name.empty()) return absl::InternalError(StrCat(spec.name, ": no llama.cpp tensor name"));
    t.info.ne.assign(spec.shape.rbegin(), spec.shape.rend());
    t.permute_heads = PermutedHeads(config, spec.name);
    const std::string module = spec.name.substr(0, spec.name.rfind('.'));
    const bool is_weight = spec.name.size() > 7 && spec.name.compare(spec.name.size() - 7, 7, ".weight") == 0;
    if (spec.shape.size() == 1 || KeptInF32(t.info.name)) {
      t.info.type = GgmlType::kF32;
    } else if (auto it = coded.find(module); it != coded.end() && is_weight) {
      t.info.type = it->second;
      t.from_codes = true;
    } else if (request.file_type) {
      TensorTypeChoice choice =
          ChooseTensorType(*request.file_type, request.pure, request.has_imatrix, mixture, t.info.name, t.info.ne[0]);
      t.info.type = choice.type;
      t.fallback = std::move(choice.fallback);
    } else if (request.type) {
      t.info.type = *request.type;
    } else {
      QUARK_ASSIGN_OR_RETURN(const checkpoint::StDType dtype, source_dtype(spec.name));
      t.info.type = dtype == checkpoint::StDType::kF16    ? GgmlType::kF16
                    : dtype == checkpoint::StDType::kBF16 ? GgmlType::kBF16
                                                          : GgmlType::kF32;
    }
    // llama-quantize's fallback for rows its blocks cannot cover (stories260K's 172-wide ffn_down).
    if (!t.from_codes && FindType(t.info.type)->quantized && t.info.ne[0] % FindType(t.info.type)->block_size != 0) {
      t.info.type = GgmlType::kF16;
    }
    tensors.push_back(std::move(t));
  }
  return tensors;
}

uint64_t PlannedDataBytes(const std::vector<PlannedGgufTensor>& tensors) {
  std::map<std::string, uint64_t> by_table;  // stacked experts add their slices to one tensor
  for (const PlannedGgufTensor& t : tensors) by_table[t.info.name] += TensorBytes(t.info.type, t.info.ne);
  uint64_t bytes = 0;
  for (const auto& [name, size] : by_table) bytes += (size + kGgufAlignment - 1) / kGgufAlignment * kGgufAlignment;
  return bytes;
}

}  // namespace quark::exporter::gguf
