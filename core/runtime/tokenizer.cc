#include "core/runtime/tokenizer.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/base/strings.h"
#include "core/runtime/sentencepiece_adapter.h"
#include "core/runtime/tokenizer_json.h"

namespace quark::runtime {

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Open(const std::string& path, int64_t bos_id, int64_t eos_id) {
  std::filesystem::path file(path);
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) {
    const bool has_model = std::filesystem::exists(file / "tokenizer.model", ec);
    if (!has_model && !std::filesystem::exists(file / "tokenizer.json", ec)) {
      return absl::NotFoundError(StrCat("no tokenizer.model or tokenizer.json in ", file.string()));
    }
    file /= has_model ? "tokenizer.model" : "tokenizer.json";
  }
  if (!std::filesystem::exists(file, ec)) return absl::NotFoundError(StrCat("no tokenizer at ", file.string()));
  std::unique_ptr<Tokenizer> tokenizer(new Tokenizer());
  if (file.extension() == ".json") {
    auto json = JsonTokenizer::Open(file.string());
    if (!json.ok()) return json.status();
    tokenizer->json_ = std::move(*json);
    tokenizer->bos_id_ = bos_id >= 0 ? bos_id : tokenizer->json_->bos_id();
    tokenizer->eos_id_ = eos_id >= 0 ? eos_id : tokenizer->json_->eos_id();
    return tokenizer;
  }
  std::string error;
  tokenizer->processor_ = SentencePieceAdapter::Load(file.string(), &error);
  if (tokenizer->processor_ == nullptr) {
    return absl::InvalidArgumentError(StrCat(file.string(), " is not a SentencePiece model: ", error));
  }
  tokenizer->bos_id_ = bos_id >= 0 ? bos_id : tokenizer->processor_->bos_id();
  tokenizer->eos_id_ = eos_id >= 0 ? eos_id : tokenizer->processor_->eos_id();
  return tokenizer;
}

absl::StatusOr<std::vector<int64_t>> Tokenizer::Encode(const std::string& text) const {
  if (json_ != nullptr) return json_->Encode(text, /*add_special_tokens=*/false);
  std::vector<int> ids;
  std::string error;
  if (!processor_->Encode(text, &ids, &error)) {
    return absl::InvalidArgumentError(StrCat("SentencePiece could not encode the text: ", error));
  }
  return std::vector<int64_t>(ids.begin(), ids.end());
}

absl::StatusOr<std::vector<int64_t>> Tokenizer::EncodeWithBos(const std::string& text) const {
  if (json_ != nullptr) return json_->Encode(text, /*add_special_tokens=*/true);
  auto ids = Encode(text);
  if (!ids.ok() || bos_id_ < 0) return ids;
  ids->insert(ids->begin(), bos_id_);
  return ids;
}

std::string Tokenizer::Decode(const std::vector<int64_t>& ids) const {
  if (json_ != nullptr) return json_->Decode(ids);
  std::vector<int> narrow(ids.begin(), ids.end());
  return processor_->Decode(narrow);
}

int64_t Tokenizer::vocab_size() const { return json_ != nullptr ? json_->vocab_size() : processor_->piece_size(); }

absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(StrCat("cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<std::vector<std::vector<int64_t>>> ReadTokenIdFile(const std::string& path) {
  auto text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  std::vector<std::vector<int64_t>> sequences;
  std::istringstream lines(*text);
  std::string line;
  for (int64_t line_no = 1; std::getline(lines, line); ++line_no) {
    for (char& c : line) {
      if (c == ',') c = ' ';
    }
    std::istringstream words(line);
    std::vector<int64_t> ids;
    for (std::string word; words >> word;) {
      size_t used = 0;
      int64_t id = -1;
      try {
        id = std::stoll(word, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != word.size() || id < 0) {
        return absl::InvalidArgumentError(StrCat(path, ":", line_no, ": \"", word, "\" is not a token id"));
      }
      ids.push_back(id);
    }
    if (!ids.empty()) sequences.push_back(std::move(ids));
  }
  if (sequences.empty()) return absl::InvalidArgumentError(StrCat(path, " holds no token ids"));
  return sequences;
}

}  // namespace quark::runtime
