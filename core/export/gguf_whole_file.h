// GGUF files built whole from float tensors, for the families whose llama.cpp layout regroups HF's tensors (DeepSeek's
// split kv_b_proj, gpt-oss's de-interleaved experts, stacked experts): the writer, the reader back to float, and the
// exporter the quantize pipeline drives (`--export gguf`), which keeps each linear as the run left it and writes the
// file at Finish. A linear the engine quantized enters as its dequantized weight (the values the run evaluated); one
// quantized to OCP MXFP4 (E8M0 scales per 32 inputs) is also marked, so a family may write it as GGML MXFP4, which
// holds those values exactly (the writer checks that they decode back bit for bit). Not streamed: the quantized
// linears' float weights are held until Finish (fine for the tiny and few-layer shapes; whole 100B+ models would need
// the streamed writer).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/checkpoint/model_config.h"
#include "core/config/layer_plan.h"
#include "core/export/gguf_file.h"
#include "core/export/gguf_whole_file_plan.h"
#include "core/export/gguf_vocab.h"
#include "core/export/gguf_writer.h"
#include "core/export/model_exporter.h"
#include "core/runtime/weight_source.h"

namespace quark::exporter::gguf {

/// One GGUF tensor: its name, its float32 values in ggml order (torch's row-major with ne reversed) and its type.
struct GgufTensorData {
  std::string name;
  at::Tensor data;  // float32, contiguous
  GgmlType type = GgmlType::kF32;
};

/// Writes `metadata` and `tensors` (in that order, each at its aligned offset) to `path`. INTERNAL naming the tensor
/// for rows that are no multiple of its type's block, and for an MXFP4 tensor whose values do not decode back bit for
/// bit (values the engine's OCP MXFP4 did not produce).
absl::Status WriteGgufTensors(const Metadata& metadata, const std::vector<GgufTensorData>& tensors,
                              const std::string& path);

/// The keys every whole-file family writes first, as convert_hf_to_gguf.py names them: general.architecture (`arch`),
/// type, name (`name`), alignment, and <arch>.block_count, context_length, embedding_length, attention.head_count,
/// attention.head_count_kv (`kv_heads`), rope.freq_base and attention.layer_norm_rms_epsilon from `b`.
Metadata WholeFileMetadata(const std::string& arch, const std::string& name, const checkpoint::ModelConfig& b,
                           int64_t kv_heads);

/// The keys every whole-file family writes last: general.file_type (ALL_F32 / MOSTLY_Q8_0 for `type`, or
/// MOSTLY_MXFP4_MOE when `mxfp4_experts`), general.quantization_version for a quantized file, and the tokenizer.
void AppendWholeFileTail(const checkpoint::ModelConfig& b, const GgufVocab& vocab, GgmlType type,
                         bool mxfp4_experts, Metadata& md);

/// Gives each of `tensors` (a writer's, in file order) its planned type; INVALID_ARGUMENT naming the first whose name
/// or shape differs from `planned` (what config.json implies: a checkpoint that disagrees with its config).
absl::Status TakePlannedTypes(const std::string& family, const std::vector<TensorInfo>& planned,
                              std::vector<GgufTensorData>& tensors);

/// The GGUF tensor `name` in float32, shaped as ne reversed; NOT_FOUND naming it when absent, INVALID_ARGUMENT for a
/// type this reader cannot decode.
absl::StatusOr<at::Tensor> DequantizedGgufTensor(const GgufFile& file, const std::string& name);

/// `weights`' float32 tensor `name`, contiguous; INVALID_ARGUMENT naming it and both shapes when it is not `shape`.
absl::StatusOr<at::Tensor> GetChecked(const runtime::WeightSource& weights, const std::string& name,
                                      const std::vector<int64_t>& shape);

/// What a whole-file family's exporter starts from: `model_dir`'s config.json, the float weights' type from the
/// export's options (WholeFileGgufType, naming the model_type) and its vocabulary (ReadModelVocab: tokenizer.model,
/// else tokenizer.json). INVALID_ARGUMENT naming the option, or the tokenizer file when both are missing (GGUF needs
/// one), unreadable, or hold more tokens than vocab_size; UNIMPLEMENTED for a BPE llama.cpp cannot reproduce.
struct WholeFileModel {
  checkpoint::ModelConfig model;
  GgmlType type = GgmlType::kF32;
  GgufVocab vocab;
};
absl::StatusOr<WholeFileModel> OpenWholeFileModel(const std::string& model_dir, const GgufExportOptions& options);

/// Writes the file at Finish from the run's weights (the quantized linears' values in front) into `path`;
/// `mxfp4_modules` are the linears the engine quantized to OCP MXFP4.
using WholeFileWrite = std::function<absl::Status(const runtime::WeightSource& weights,
                                                  const std::set<std::string>& mxfp4_modules, const std::string& path)>;

/// The pipeline's exporter for a whole-file family. Checks `plan` before any byte is written (INVALID_ARGUMENT naming
/// the module whose activations or KV cache the plan quantizes: GGUF stores weights only); ALREADY_EXISTS when
/// `output_file` exists. Finish writes `output_file`.partial through `write`, then renames it.
absl::StatusOr<std::unique_ptr<ModelExporter>> CreateWholeFileGgufExporter(const std::string& output_file,
                                                                           const LayerPlan& plan, WholeFileWrite write);

}  // namespace quark::exporter::gguf
