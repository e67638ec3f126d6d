// llama-quantize's file types and per-tensor mixtures (llama.cpp src/llama-quant.cpp, the build node-llama-cpp
// ships): a file type ("Q4_K_M") names a default ggml type and rules that bump some tensors (attn_v and ffn_down by
// layer, output / tied token_embd to Q6_K, GQA and 8-expert rules), then rows that the chosen type's blocks cannot
// cover fall back (Q4_K -> Q5_0, ..., F16 when nothing fits). `pure` keeps the default type everywhere, as
// `llama-quantize --pure`; the fallback still applies.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/export/gguf_blocks.h"

namespace quark::exporter::gguf {

/// One llama_ftype.
struct FileType {
  const char* name;       // llama-quantize's spelling: "Q4_K_M", "Q8_0", "F16"
  uint32_t ftype;         // llama_ftype (general.file_type)
  GgmlType default_type;  // llama_ftype_get_default_type
};

/// By name, case-insensitive (llama-quantize's aliases Q3_K, Q4_K, Q5_K are not taken: say Q4_K_M or Q4_K_S).
/// INVALID_ARGUMENT "gguf_type: ..." listing the accepted names for an unknown one.
absl::StatusOr<const FileType*> ParseFileType(std::string_view name);

/// What the rules need to know of the model.
struct MixtureModel {
  int n_layer = 0;       // decoder layers (n_ffn_down; n_attention_wv when every layer has one attn_v)
  int n_head = 0;
  int n_head_kv = 0;     // n_gqa = n_head / n_head_kv
  int n_expert = 0;      // 0 or 1 = dense
  bool tied_embeddings = false;  // no output.weight in the file: token_embd follows the output rules
};

struct TensorTypeChoice {
  GgmlType type;
  /// Empty, or llama-quantize's fallback warning for the log ("blk.0.ffn_down.weight - ncols 172 not divisible by
  /// 256 (required for type Q4_K) -> falling back to Q5_0").
  std::string fallback;
};

/// The type llama-quantize gives the quantizable 2-D weight `name` (GGUF name, e.g. "blk.3.attn_v.weight") with
/// rows of `ncols`, for file type `ft` (a float default type keeps every tensor in it). `has_imatrix` as the run's.
TensorTypeChoice ChooseTensorType(const FileType& ft, bool pure, bool has_imatrix, const MixtureModel& model,
                                  const std::string& name, int64_t ncols);

}  // namespace quark::exporter::gguf
