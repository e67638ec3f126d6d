// GGUF v3 export for llama.cpp, streamed by layer: the whole header (metadata, vocabulary, tensor table with every
// type and offset) is fixed at Create, each decoder layer's tensors are written at their offsets as the layer
// finishes, and the file is built as `<output>.partial`, read back and checked, then renamed to `<output>`.
//
// Tensor types:
//  - a linear the engine quantized goes in losslessly from its codes: uint4 asymmetric per group of 32 -> Q4_1
//    (d = scale, m = -scale * zero_point, both fp16), int4 symmetric per group of 32 -> Q4_0 (q = code + 8), int8
//    symmetric per group of 32 -> Q8_0; any other weight scheme, and any activation or KV-cache quantization, is
//    refused at Create (INVALID_ARGUMENT naming the module and why);
//  - every other 2-D weight (embeddings, lm_head, excluded or cast linears) takes the type llama-quantize gives it
//    for `options.file_type` (gguf_mixture.h: the mixture's per-tensor rules unless `options.pure`, and its
//    fallback, logged, for rows the type's blocks cannot cover), or `options.type` for every such tensor, quantized
//    as llama-quantize does from an F32 file (llama.cpp's reference kernels; F16 for a quantized type when the row
//    length is not a multiple of its block); neither = the source's dtype (F32, F16 or BF16);
//  - 1-D tensors (norms, biases) are F32, as llama.cpp's converter writes them and llama-quantize keeps them.
// Mistral is written as architecture "llama", as llama.cpp's converter does: llama.cpp then attends without
// Mistral's sliding window, so its results differ from the engine's past `sliding_window` tokens.
#pragma once

#include <functional>
#include <memory>
#include <vector>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "core/config/layer_plan.h"
#include "core/config/quant_spec.h"
#include "core/export/gguf_blocks.h"
#include "core/export/gguf_imatrix.h"
#include "core/export/gguf_mixture.h"
#include "core/export/gguf_pre_encoded.h"
#include "core/export/model_exporter.h"

namespace quark::exporter {

struct GgufExportOptions {
  /// The type of the float weights (see above); unset = like the source. Ignored when file_type is set.
  std::optional<gguf::GgmlType> type;
  /// llama-quantize's file type (gguf::ParseFileType): the per-tensor mixture of the float weights and
  /// general.file_type. Points into gguf_mixture.cc's static table.
  const gguf::FileType* file_type = nullptr;
  /// With file_type: every float weight in its default type (llama-quantize --pure), fallbacks aside.
  bool pure = false;
  /// Importance matrix (llama-quantize --imatrix) for the float weights: the mixture rules see it, and the quantized
  /// tensors named in it (every block type but Q8_0, whose ggml quantizer ignores it) are quantized with its
  /// weights. Create refuses an entry naming no tensor of the model and one whose size is not the tensor's
  /// columns × experts. Entries may be added after Create, before their tensor is written (the calibration pass's
  /// imatrix, quantize/imatrix_collector.h). Engine codes ignore it.
  std::shared_ptr<const gguf::ImatrixStats> imatrix;
  /// general.name; empty = the model folder's name.
  std::string name;
  /// Write `output.weight` (from the weights given to Finish, typed like token_embd) although config.json ties it to
  /// the embedding: a rotation made the two matrices differ. llama.cpp uses a file's output.weight when it has one.
  bool untie_embeddings = false;
  /// #37 item 4: if set, called at Create with each planned HF tensor ("model.layers.0.mlp.down_proj.weight") and the
  /// GGUF type the file will hold it in (AWQ before llama.cpp's K-quants simulates that type).
  std::function<void(const std::string& hf_name, gguf::GgmlType type)> on_planned;
  /// #37 item 4: tensors an algorithm encoded itself (K-quant-aware GPTQ). Create publishes the plan's types into it;
  /// a float weight with data there is written from that data (INTERNAL when it does not decode to the weight's
  /// values bit for bit or has another type than planned) instead of being quantized.
  std::shared_ptr<gguf::PreEncodedTensors> pre_encoded;
};

/// Plans the GGUF export of `model_dir` (config.json, safetensors, tokenizer.model) quantized by `config` / `plan`
/// into the file `output_file`. Errors before any byte is written: INVALID_ARGUMENT for an architecture GGUF does not
/// take here (OPT, llama3 rope scaling), a missing or unreadable tokenizer.model (naming it), a scheme GGUF cannot
/// hold (naming the module), a quantized embedding or lm_head; ALREADY_EXISTS when `output_file` exists.
absl::StatusOr<std::unique_ptr<ModelExporter>> CreateGgufExporter(const std::string& model_dir,
                                                                 const std::string& output_file, const Config& config,
                                                                 const LayerPlan& plan, GgufExportOptions options = {});

}  // namespace quark::exporter
