// SentencePiece behind a plain interface. libsentencepiece is loaded at run time from the module
// libquark_sentencepiece.so (sentencepiece_module.cc explains why it cannot be linked directly); the module is
// found through $QUARK_SENTENCEPIECE_MODULE, the build tree, next to the executable, or the loader's path.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace quark::runtime {

class SentencePieceAdapter {
 public:
  /// nullptr with `*error` set when `path` is not a SentencePiece model.
  static std::unique_ptr<SentencePieceAdapter> Load(const std::string& path, std::string* error);
  ~SentencePieceAdapter();
  /// false with `*error` set on failure.
  bool Encode(const std::string& text, std::vector<int>* ids, std::string* error) const;
  std::string Decode(const std::vector<int>& ids) const;
  int bos_id() const;
  int eos_id() const;
  int piece_size() const;

 private:
  struct Impl;
  explicit SentencePieceAdapter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace quark::runtime
