#include "core/runtime/tokenizer_json_bpe.h"

#include <fmt/format.h>

#include <queue>

#include "core/base/strings.h"
#include "core/runtime/tokenizer_json_pipeline.h"
#include "core/runtime/tokenizer_json_text.h"

namespace quark::runtime::tokenizer_json {
namespace {

using Json = nlohmann::json;

absl::StatusOr<std::string> OptionalString(const Json& object, const char* field, const std::string& path) {
  auto it = object.find(field);
  if (it == object.end() || it->is_null()) return std::string();
  if (!it->is_string()) return absl::InvalidArgumentError(StrCat(path, ".", field, " must be a string or null"));
  return it->get<std::string>();
}

}  // namespace

absl::StatusOr<std::unique_ptr<BpeModel>> BpeModel::FromJson(const Json& model, const std::string& path) {
  if (!model.is_object()) return absl::InvalidArgumentError(StrCat(path, " must be an object"));
  // Older exports leave "type" out of a BPE model; tokenizers infers it from the merges.
  std::string type = "BPE";
  if (model.contains("type")) {
    auto named = GetString(model, "type", path);
    if (!named.ok()) return named.status();
    type = *named;
  }
  if (type != "BPE") {
    return absl::UnimplementedError(StrCat(path, ".type: model type \"", type, "\" is not supported (only BPE)"));
  }
  std::unique_ptr<BpeModel> bpe(new BpeModel());
  auto vocab = model.find("vocab");
  if (vocab == model.end() || !vocab->is_object()) {
    return absl::InvalidArgumentError(StrCat(path, ".vocab must be an object of token -> id"));
  }
  for (const auto& [token, id] : vocab->items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      return absl::InvalidArgumentError(StrCat(path, ".vocab[", Json(token).dump(), "] must be an id >= 0, got ",
                                               id.dump()));
    }
    const auto value = id.get<int32_t>();
    bpe->vocab_[token] = value;
    if (static_cast<size_t>(value) >= bpe->id_to_token_.size()) bpe->id_to_token_.resize(value + 1);
    bpe->id_to_token_[value] = token;
  }
  auto unk = OptionalString(model, "unk_token", path);
  auto prefix = OptionalString(model, "continuing_subword_prefix", path);
  auto suffix = OptionalString(model, "end_of_word_suffix", path);
  auto fuse_unk = GetBool(model, "fuse_unk", false, path);
  auto byte_fallback = GetBool(model, "byte_fallback", false, path);
  auto ignore_merges = GetBool(model, "ignore_merges", false, path);
  for (const absl::Status& s : {unk.status(), prefix.status(), suffix.status(), fuse_unk.status(),
                                byte_fallback.status(), ignore_merges.status()}) {
    if (!s.ok()) return s;
  }
  if (!unk->empty()) {
    bpe->unk_id_ = static_cast<int32_t>(bpe->TokenToId(*unk));
    if (bpe->unk_id_ < 0) {
      return absl::InvalidArgumentError(StrCat(path, ".unk_token \"", *unk, "\" is not in ", path, ".vocab"));
    }
  }
  bpe->continuing_subword_prefix_ = *prefix;
  bpe->end_of_word_suffix_ = *suffix;
  bpe->fuse_unk_ = *fuse_unk;
  bpe->byte_fallback_ = *byte_fallback;
  bpe->ignore_merges_ = *ignore_merges;
  if (auto status = bpe->AddMerges(model.value("merges", Json::array()), path + ".merges"); !status.ok()) {
    return status;
  }
  bpe->all_bytes_present_ = true;
  for (int b = 0; b < 256; ++b) {
    bpe->byte_ids_[b] = static_cast<int32_t>(bpe->TokenToId(fmt::format("<0x{:02X}>", b)));
    if (bpe->byte_ids_[b] < 0) bpe->all_bytes_present_ = false;
  }
  return bpe;
}

absl::Status BpeModel::AddMerges(const Json& merges, const std::string& path) {
  if (!merges.is_array()) return absl::InvalidArgumentError(StrCat(path, " must be an array"));
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const Json& merge = merges[rank];
    std::string left, right;
    if (merge.is_string()) {
      const std::string text = merge.get<std::string>();
      const size_t space = text.find(' ');
      if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
        return absl::InvalidArgumentError(StrCat(path, "[", rank, "] = ", merge.dump(),
                                                 " must be two tokens separated by one space"));
      }
      left = text.substr(0, space);
      right = text.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      left = merge[0].get<std::string>();
      right = merge[1].get<std::string>();
    } else {
      return absl::InvalidArgumentError(StrCat(path, "[", rank, "] must be \"a b\" or [\"a\", \"b\"], got ",
                                               merge.dump()));
    }
    // The merged token is the pair's text without the right piece's continuation prefix (tokenizers' rule).
    std::string merged_right = right;
    if (!continuing_subword_prefix_.empty() && merged_right.rfind(continuing_subword_prefix_, 0) == 0) {
      merged_right.erase(0, continuing_subword_prefix_.size());
    }
    const int64_t left_id = TokenToId(left), right_id = TokenToId(right), new_id = TokenToId(left + merged_right);
    if (left_id < 0 || right_id < 0 || new_id < 0) {
      const std::string& missing = left_id < 0 ? left : right_id < 0 ? right : left + merged_right;
      return absl::InvalidArgumentError(StrCat(path, "[", rank, "] = ", merge.dump(), ": token ", Json(missing).dump(),
                                               " is not in the vocab"));
    }
    // The first occurrence of a pair keeps its rank (tokenizers' HashMap insert keeps the last; duplicates do not
    // occur in real files and the rank of the first is what the merge order means).
    merges_.try_emplace(PairKey(static_cast<int32_t>(left_id), static_cast<int32_t>(right_id)),
                        Merge{static_cast<int32_t>(rank), static_cast<int32_t>(new_id)});
  }
  return absl::OkStatus();
}

int64_t BpeModel::TokenToId(std::string_view token) const {
  auto it = vocab_.find(std::string(token));
  return it == vocab_.end() ? -1 : it->second;
}

const std::string& BpeModel::IdToToken(int64_t id) const {
  static const std::string kEmpty;
  return id >= 0 && id < size() ? id_to_token_[id] : kEmpty;
}

std::vector<int32_t> BpeModel::InitialSymbols(std::string_view word) const {
  std::vector<int32_t> symbols;
  symbols.reserve(word.size());
  bool previous_unk = false;
  std::string piece;
  for (size_t pos = 0; pos < word.size();) {
    const size_t begin = pos;
    NextCodePoint(word, &pos);
    piece.assign(word.substr(begin, pos - begin));
    if (begin > 0) piece.insert(0, continuing_subword_prefix_);
    if (pos == word.size()) piece += end_of_word_suffix_;
    if (auto it = vocab_.find(piece); it != vocab_.end()) {
      symbols.push_back(it->second);
      previous_unk = false;
      continue;
    }
    if (byte_fallback_ && all_bytes_present_) {
      for (size_t b = begin; b < pos; ++b) symbols.push_back(byte_ids_[static_cast<unsigned char>(word[b])]);
      previous_unk = false;
      continue;
    }
    if (unk_id_ >= 0) {
      if (!(fuse_unk_ && previous_unk)) symbols.push_back(unk_id_);
      previous_unk = true;
    }
  }
  return symbols;
}

void BpeModel::MergeAll(std::vector<int32_t>* symbols) const {
  const int n = static_cast<int>(symbols->size());
  if (n < 2) return;
  struct Candidate {
    int32_t rank, pos, new_id;
    bool operator<(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::vector<int32_t>& id = *symbols;
  std::vector<int> prev(n), next(n);
  std::vector<char> alive(n, 1);
  std::priority_queue<Candidate> queue;
  auto push = [&](int left) {
    if (left < 0 || next[left] >= n) return;
    const int right = next[left];
    auto it = merges_.find(PairKey(id[left], id[right]));
    if (it != merges_.end()) queue.push({it->second.rank, left, it->second.new_id});
  };
  for (int i = 0; i < n; ++i) prev[i] = i - 1, next[i] = i + 1;
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    const int left = top.pos;
    if (!alive[left] || next[left] >= n) continue;
    const int right = next[left];
    auto it = merges_.find(PairKey(id[left], id[right]));
    if (it == merges_.end() || it->second.new_id != top.new_id) continue;  // stale entry
    id[left] = top.new_id;
    alive[right] = 0;
    next[left] = next[right];
    if (next[left] < n) prev[next[left]] = left;
    if (prev[left] >= 0) push(prev[left]);
    push(left);
  }
  int out = 0;
  for (int i = 0; i < n; i = next[i]) id[out++] = id[i];
  id.resize(out);
}

void BpeModel::Tokenize(std::string_view word, std::vector<int64_t>* ids) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (auto it = vocab_.find(std::string(word)); it != vocab_.end()) {
      ids->push_back(it->second);
      return;
    }
  }
  std::vector<int32_t> symbols = InitialSymbols(word);
  MergeAll(&symbols);
  ids->insert(ids->end(), symbols.begin(), symbols.end());
}

}  // namespace quark::runtime::tokenizer_json
