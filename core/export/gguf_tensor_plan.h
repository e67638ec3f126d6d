// Which ggml type each tensor of a GGUF export gets, decided from the model's config, the layer plan and the GGUF
// options alone (no weights, no LibTorch). The writer lays its file out by this plan and the estimator
// (core/estimate/artifact_size.cc) sizes the artifact by it, so the two cannot disagree:
//  - a linear the engine quantized keeps its codes: uint4 asymmetric / int4 symmetric / int8 symmetric per group of
//    32 -> Q4_1 / Q4_0 / Q8_0; any other weight scheme, and any activation quantization, is refused (naming the
//    module);
//  - every other 2-D weight takes llama-quantize's type for the file type (gguf_mixture.h), or the one type asked
//    for, or the source's dtype; a quantized type whose blocks do not cover a row falls back to F16;
//  - 1-D tensors and MoE routers are F32.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checkpoint/dtype.h"
#include "core/checkpoint/model_config.h"
#include "core/config/layer_plan.h"
#include "core/config/quant_spec.h"
#include "core/export/gguf_file.h"
#include "core/export/gguf_mixture.h"

namespace quark::exporter::gguf {

/// The float weights' type: llama-quantize's file type (with --pure and whether an imatrix is given), else one type
/// for all of them, else (neither) the source's dtype.
struct GgufTypeRequest {
  const FileType* file_type = nullptr;
  std::optional<GgmlType> type;
  bool pure = false;
  bool has_imatrix = false;
};

/// One HF tensor's part of the file: a whole GGUF tensor, or (an MoE expert's weight) the slice `expert` of the
/// stacked tensor named info.name.
struct PlannedGgufTensor {
  TensorInfo info;            // name, ne (GGUF order: innermost first) and type; offsets are the writer's
  std::string hf_name;
  int64_t expert = -1;        // -1 = a tensor of its own
  int64_t permute_heads = 0;  // 0 = rows keep their order
  bool from_codes = false;    // a quantized linear's weight, written from the engine's codes
  std::string fallback;       // llama-quantize's fallback warning for its type, or empty
};

/// The GGUF type an engine weight scheme maps to (Q4_1 / Q4_0 / Q8_0), or INVALID_ARGUMENT naming `module` and why
/// GGUF cannot hold it.
absl::StatusOr<GgmlType> GgufTypeForScheme(const std::string& module, const QuantSpec& weight);

/// Whether GGUF can hold what the plan asks of module `a` (`where` names it in errors): INVALID_ARGUMENT for a
/// quantized module that is not a decoder layer's linear, or one with activation or KV-cache quantization.
absl::Status CheckGgufWeightsOnly(const LayerAssignment& a, const std::string& where);

/// The modules of `plan` whose weights the file holds as engine codes, with their types; INVALID_ARGUMENT naming the
/// module for what GGUF cannot hold (a quantized module outside the decoder layers, activation quantization, a weight
/// scheme of no GGUF block type).
absl::StatusOr<std::map<std::string, GgmlType>> CodedGgufTypes(const LayerPlan& plan);

/// The source dtype of an HF tensor (for GgufTypeRequest without a type); NOT_FOUND when the checkpoint lacks it.
using SourceDtypeOf = std::function<absl::StatusOr<checkpoint::StDType>(const std::string& hf_name)>;

/// Every tensor of the GGUF of `config` (its tie_word_embeddings already as the file has it), in ModelTensors order.
absl::StatusOr<std::vector<PlannedGgufTensor>> PlanGgufTensors(const checkpoint::ModelConfig& config,
                                                               const std::map<std::string, GgmlType>& coded,
                                                               const GgufTypeRequest& request,
                                                               const SourceDtypeOf& source_dtype);

/// Bytes of the tensor data of a planned file (each part's rows in its type; stacked experts sum their slices).
uint64_t PlannedDataBytes(const std::vector<PlannedGgufTensor>& tensors);

}  // namespace quark::exporter::gguf
