// What ties an HF Llama-family model to llama.cpp's GGUF form, both ways: the architecture name and its metadata
// keys, the tensor names, and the Q/K row order (convert_hf_to_gguf.py's `permute`: HF keeps each head's rotary
// pairs as two halves, llama.cpp interleaves them; Qwen2 is converted without the permutation).
#pragma once

#include <cstdint>
#include <string>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/checkpoint/model_config.h"
#include "core/export/gguf_arch_names.h"
#include "core/export/gguf_file.h"
#include "core/export/gguf_vocab.h"

namespace quark::exporter::gguf {

/// HF rotate-half row order -> llama.cpp's interleaved order, on dim 0 of `rows` ([out, ...]: weights, codes,
/// per-group scales, biases). `heads` divides rows.size(0) into heads of an even size.
at::Tensor PermuteRows(const at::Tensor& rows, int64_t heads);
/// The inverse of PermuteRows.
at::Tensor UnpermuteRows(const at::Tensor& rows, int64_t heads);

/// general.*, <arch>.* hyperparameters and tokenizer.ggml.* for `config`, with general.file_type `file_type`.
/// The vocabulary is padded to config.vocab_size with unused "[PAD<i>]" pieces (as llama.cpp's converter does);
/// INVALID_ARGUMENT when it has more pieces than vocab_size.
absl::StatusOr<Metadata> BuildMetadata(const checkpoint::ModelConfig& config, const GgufVocab& vocab,
                                       const std::string& name, uint32_t file_type, bool quantized);

/// tokenizer.ggml.* of `vocab`. A SentencePiece ("llama") vocabulary is padded to `vocab_size` with unused
/// "[PAD<i>]" pieces, and the bos/eos ids given (>= 0) win over the tokenizer's, as convert_hf_to_gguf.py's
/// SpecialVocab reads config.json; a BPE ("gpt2") one was read for vocab_size with its special ids resolved
/// (AppendBpeTokenizerMetadata).
void AppendTokenizerMetadata(int64_t vocab_size, int64_t bos_token_id, int64_t eos_token_id, const GgufVocab& vocab,
                             Metadata& md);

/// The ModelConfig a GGUF describes (architecture llama or qwen2; tied embeddings when it has no output.weight).
/// INVALID_ARGUMENT naming the key for a missing or inconsistent hyperparameter.
absl::StatusOr<checkpoint::ModelConfig> ModelConfigFromGguf(const GgufFile& file);

}  // namespace quark::exporter::gguf
