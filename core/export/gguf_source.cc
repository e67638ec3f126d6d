#include "core/export/gguf_source.h"

#include <filesystem>
#include <fstream>

#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/export/gguf_deepseek.h"
#include "core/export/gguf_gemma.h"
#include "core/export/gguf_gpt_oss.h"
#include "core/export/gguf_llama4.h"
#include "core/export/gguf_model.h"
#include "core/export/gguf_moe.h"
#include "core/export/gguf_vocab.h"

namespace quark::exporter {

bool IsGgufFile(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in.gcount() == 4 && std::string(magic, 4) == "GGUF";
}

absl::StatusOr<std::shared_ptr<GgufWeightSource>> GgufWeightSource::Open(const std::string& path) {
  std::shared_ptr<GgufWeightSource> source(new GgufWeightSource());
  QUARK_ASSIGN_OR_RETURN(source->file_, gguf::GgufFile::Open(path));
  if (const gguf::Value* arch = source->file_->Find("general.architecture"); arch != nullptr && arch->text == "deepseek2") {
    QUARK_ASSIGN_OR_RETURN(source->config_, gguf::DeepseekModelConfigFromGguf(*source->file_));
    QUARK_ASSIGN_OR_RETURN(source->whole_, gguf::DeepseekWeightsFromGguf(*source->config_.deepseek, *source->file_));
    return source;
  }
  // gpt-oss and llama4 (#32): read whole as well (gate/up interleaved back, the expert stacks split).
  if (const gguf::Value* arch = source->file_->Find("general.architecture"); arch != nullptr && arch->text == "gpt-oss") {
    QUARK_ASSIGN_OR_RETURN(source->config_, gguf::GptOssModelConfigFromGguf(*source->file_));
    QUARK_ASSIGN_OR_RETURN(source->whole_, gguf::GptOssWeightsFromGguf(*source->config_.gpt_oss, *source->file_));
    return source;
  }
  if (const gguf::Value* arch = source->file_->Find("general.architecture"); arch != nullptr && arch->text == "llama4") {
    QUARK_ASSIGN_OR_RETURN(source->config_, gguf::Llama4ModelConfigFromGguf(*source->file_));
    QUARK_ASSIGN_OR_RETURN(source->whole_, gguf::Llama4WeightsFromGguf(*source->config_.llama4, *source->file_));
    return source;
  }
  QUARK_ASSIGN_OR_RETURN(source->config_, gguf::ModelConfigFromGguf(*source->file_));
  return source;
}

bool GgufWeightSource::Has(const std::string& name) const {
  if (whole_) return whole_->Has(name);
  gguf::GgufSlot slot = gguf::GgufTensorSlot(name);
  if (std::string gemma = gguf::GemmaGgufTensorName(config_, name); !gemma.empty()) slot = {std::move(gemma), -1};
  const gguf::TensorInfo* info = slot.name.empty() ? nullptr : file_->FindTensor(slot.name);
  return info != nullptr && (slot.expert < 0 || (info->ne.size() == 3 && slot.expert < info->ne[2]));
}

absl::StatusOr<at::Tensor> GgufWeightSource::Get(const std::string& name, at::ScalarType dtype) const {
  if (whole_) return whole_->Get(name, dtype);
  gguf::GgufSlot slot = gguf::GgufTensorSlot(name);
  if (std::string gemma = gguf::GemmaGgufTensorName(config_, name); !gemma.empty()) slot = {std::move(gemma), -1};
  const gguf::TensorInfo* info = slot.name.empty() ? nullptr : file_->FindTensor(slot.name);
  if (info == nullptr) return absl::NotFoundError(StrCat(name, ": not in ", file_->path()));
  if (slot.expert >= 0 && (info->ne.size() != 3 || slot.expert >= info->ne[2])) {
    return absl::NotFoundError(StrCat(name, ": ", slot.name, " in ", file_->path(), " has no expert ", slot.expert,
                                      " (ne ", StrJoin(info->ne, "x"), ")"));
  }
  if (dtype != at::kFloat && dtype != at::kBFloat16 && dtype != at::kHalf) {
    return absl::InvalidArgumentError(StrCat(name, ": dtype ", c10::toString(dtype), " is not a float dtype"));
  }
  // An expert's weight is its [out, in] slice of the stacked {in, out, n_expert} tensor.
  std::vector<int64_t> shape(info->ne.rbegin(), info->ne.rend());
  int64_t rows = info->Rows();
  if (slot.expert >= 0) {
    shape.erase(shape.begin());
    rows = info->ne[1];
  }
  at::Tensor values = at::empty(shape, at::kFloat);
  const gguf::TypeTraits* traits = gguf::FindType(info->type);
  const int64_t n = info->RowLength(), row_bytes = gguf::RowBytes(info->type, n);
  const uint8_t* data = file_->TensorData(*info) + (slot.expert < 0 ? 0 : slot.expert * rows * row_bytes);
  float* out = values.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) traits->to_float(data + r * row_bytes, out + r * n, n);
  file_->Release(*info);  // the float copy is what the caller keeps
  if (const int64_t heads = gguf::PermutedHeads(config_, name); heads > 0) values = gguf::UnpermuteRows(values, heads);
  if (const float shift = gguf::GemmaNormShift(config_, name); shift != 0) values = values - shift;  // back to HF's w
  return values.to(dtype);
}

namespace {

// The tokenizer.json beside a "gpt2" GGUF, read as the exporter reads it for the GGUF's vocabulary size.
absl::StatusOr<std::string> GgufTokenizerJson(const gguf::GgufFile& file) {
  const std::filesystem::path dir = std::filesystem::path(file.path()).parent_path();
  const std::string path = (dir / "tokenizer.json").string();
  const gguf::Value* tokens = file.Find("tokenizer.ggml.tokens");
  const gguf::Value* types = file.Find("tokenizer.ggml.token_type");
  const gguf::Value* merges = file.Find("tokenizer.ggml.merges");
  if (tokens == nullptr || types == nullptr || merges == nullptr || tokens->texts.size() != types->numbers.size()) {
    return absl::InvalidArgumentError(StrCat(file.path(), ": tokenizer.ggml.tokens/token_type/merges missing or of "
                                                          "different lengths"));
  }
  QUARK_ASSIGN_OR_RETURN(const gguf::BpeVocab vocab,
                         gguf::ReadBpeVocab(dir.string(), static_cast<int64_t>(tokens->texts.size()), ""));
  for (size_t i = 0; i < tokens->texts.size(); ++i) {
    if (tokens->texts[i] != vocab.tokens[i] || types->numbers[i] != static_cast<double>(vocab.types[i])) {
      return absl::InvalidArgumentError(StrCat(path, ": token ", i, " (\"", tokens->texts[i], "\" in ", file.path(),
                                               ") differs: not the vocabulary of this GGUF"));
    }
  }
  if (merges->texts != vocab.merges) {
    return absl::InvalidArgumentError(StrCat(path, ": its merges differ from ", file.path(), "'s"));
  }
  return path;
}

}  // namespace

absl::StatusOr<std::string> GgufTokenizerModel(const gguf::GgufFile& file) {
  if (const gguf::Value* model = file.Find("tokenizer.ggml.model"); model != nullptr && model->text == "gpt2") {
    return GgufTokenizerJson(file);
  }
  const std::string path =
      (std::filesystem::path(file.path()).parent_path() / "tokenizer.model").string();
  QUARK_ASSIGN_OR_RETURN(const gguf::SentencePieceVocab vocab, gguf::ReadSentencePieceVocab(path));
  const gguf::Value* tokens = file.Find("tokenizer.ggml.tokens");
  const gguf::Value* scores = file.Find("tokenizer.ggml.scores");
  const gguf::Value* types = file.Find("tokenizer.ggml.token_type");
  if (tokens == nullptr || scores == nullptr || types == nullptr || tokens->texts.size() != scores->numbers.size() ||
      tokens->texts.size() != types->numbers.size()) {
    return absl::InvalidArgumentError(StrCat(file.path(), ": tokenizer.ggml.tokens/scores/token_type missing or of "
                                                          "different lengths"));
  }
  for (size_t i = 0; i < tokens->texts.size(); ++i) {
    const bool padding = i >= vocab.pieces.size();
    const bool same = padding ? types->numbers[i] == gguf::GgufTokenType(gguf::PieceType::kUnused)
                              : tokens->texts[i] == vocab.pieces[i] &&
                                    static_cast<float>(scores->numbers[i]) == vocab.scores[i] &&
                                    types->numbers[i] == gguf::GgufTokenType(vocab.types[i]);
    if (!same) {
      return absl::InvalidArgumentError(StrCat(path, ": token ", i, " (\"", tokens->texts[i], "\" in ", file.path(),
                                               ") differs: not the vocabulary of this GGUF"));
    }
  }
  return path;
}

}  // namespace quark::exporter
