// A C interface to libsentencepiece, built as its own loadable module (libquark_sentencepiece.so).
//
// Why: Debian's libsentencepiece bundles and exports its own copy of protobuf-lite. Linked into a process that
// also links libprotobuf (every engine binary does, through the config protos), the dynamic linker binds
// libprotobuf's start-up code to sentencepiece's copies and the process dies before main(). Loaded with
// dlopen(RTLD_LOCAL | RTLD_DEEPBIND) from this module, sentencepiece keeps its protobuf to itself.
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <sentencepiece_processor.h>

namespace {

void CopyError(const std::string& message, char* error, size_t error_size) {
  if (error == nullptr || error_size == 0) return;
  std::strncpy(error, message.c_str(), error_size - 1);
  error[error_size - 1] = '\0';
}

}  // namespace

extern "C" {

void* quark_spm_load(const char* path, char* error, size_t error_size) {
  auto* processor = new sentencepiece::SentencePieceProcessor();
  const auto status = processor->Load(path);
  if (!status.ok()) {
    CopyError(status.ToString(), error, error_size);
    delete processor;
    return nullptr;
  }
  return processor;
}

void quark_spm_free(void* handle) { delete static_cast<sentencepiece::SentencePieceProcessor*>(handle); }

// On success *ids is malloc'ed (free with quark_spm_free_buffer) and 0 is returned.
int quark_spm_encode(void* handle, const char* text, size_t length, int** ids, size_t* count, char* error,
                     size_t error_size) {
  std::vector<int> pieces;
  const auto status = static_cast<sentencepiece::SentencePieceProcessor*>(handle)->Encode(std::string(text, length), &pieces);
  if (!status.ok()) {
    CopyError(status.ToString(), error, error_size);
    return 1;
  }
  *count = pieces.size();
  *ids = static_cast<int*>(std::malloc(sizeof(int) * (pieces.empty() ? 1 : pieces.size())));
  if (*ids == nullptr) return 1;
  std::memcpy(*ids, pieces.data(), sizeof(int) * pieces.size());
  return 0;
}

// *text is malloc'ed (free with quark_spm_free_buffer), *length its size.
int quark_spm_decode(void* handle, const int* ids, size_t count, char** text, size_t* length) {
  std::string out;
  const auto status = static_cast<sentencepiece::SentencePieceProcessor*>(handle)->Decode(std::vector<int>(ids, ids + count), &out);
  if (!status.ok()) return 1;
  *length = out.size();
  *text = static_cast<char*>(std::malloc(out.size() + 1));
  if (*text == nullptr) return 1;
  std::memcpy(*text, out.data(), out.size());
  return 0;
}

void quark_spm_free_buffer(void* buffer) { std::free(buffer); }

int quark_spm_bos_id(void* handle) { return static_cast<sentencepiece::SentencePieceProcessor*>(handle)->bos_id(); }
int quark_spm_eos_id(void* handle) { return static_cast<sentencepiece::SentencePieceProcessor*>(handle)->eos_id(); }
int quark_spm_piece_size(void* handle) { return static_cast<sentencepiece::SentencePieceProcessor*>(handle)->GetPieceSize(); }

}  // extern "C"
