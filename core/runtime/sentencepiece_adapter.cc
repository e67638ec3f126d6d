#include "core/runtime/sentencepiece_adapter.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>

namespace quark::runtime {
namespace {

// The C interface of libquark_sentencepiece.so (sentencepiece_module.cc).
struct ModuleApi {
  void* (*load)(const char*, char*, size_t) = nullptr;
  void (*free_handle)(void*) = nullptr;
  int (*encode)(void*, const char*, size_t, int**, size_t*, char*, size_t) = nullptr;
  int (*decode)(void*, const int*, size_t, char**, size_t*) = nullptr;
  void (*free_buffer)(void*) = nullptr;
  int (*bos_id)(void*) = nullptr;
  int (*eos_id)(void*) = nullptr;
  int (*piece_size)(void*) = nullptr;
  std::string error;
};

std::vector<std::string> Candidates() {
  std::vector<std::string> paths;
  if (const char* env = std::getenv("QUARK_SENTENCEPIECE_MODULE"); env != nullptr && *env != '\0') paths.push_back(env);
#ifdef QUARK_SENTENCEPIECE_MODULE_PATH
  paths.push_back(QUARK_SENTENCEPIECE_MODULE_PATH);
#endif
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    paths.push_back((exe.parent_path() / "libquark_sentencepiece.so").string());
    paths.push_back((exe.parent_path() / "../lib/libquark_sentencepiece.so").string());
  }
  paths.push_back("libquark_sentencepiece.so");  // the loader's search path
  return paths;
}

template <typename Fn>
bool Bind(void* library, const char* name, Fn* target) {
  *target = reinterpret_cast<Fn>(dlsym(library, name));
  return *target != nullptr;
}

const ModuleApi& Api() {
  static ModuleApi api;
  static std::once_flag once;
  std::call_once(once, [] {
    void* library = nullptr;
    std::string tried;
    for (const std::string& path : Candidates()) {
      library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
      if (library != nullptr) break;
      tried += (tried.empty() ? "" : "; ") + std::string(dlerror());
    }
    if (library == nullptr) {
      api.error = "cannot load libquark_sentencepiece.so (set QUARK_SENTENCEPIECE_MODULE): " + tried;
      return;
    }
    const bool ok = Bind(library, "quark_spm_load", &api.load) && Bind(library, "quark_spm_free", &api.free_handle) &&
                    Bind(library, "quark_spm_encode", &api.encode) && Bind(library, "quark_spm_decode", &api.decode) &&
                    Bind(library, "quark_spm_free_buffer", &api.free_buffer) &&
                    Bind(library, "quark_spm_bos_id", &api.bos_id) && Bind(library, "quark_spm_eos_id", &api.eos_id) &&
                    Bind(library, "quark_spm_piece_size", &api.piece_size);
    if (!ok) api.error = "libquark_sentencepiece.so lacks a quark_spm_* symbol";
  });
  return api;
}

}  // namespace

struct SentencePieceAdapter::Impl {
  void* handle = nullptr;
  ~Impl() {
    if (handle != nullptr) Api().free_handle(handle);
  }
};

SentencePieceAdapter::SentencePieceAdapter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SentencePieceAdapter::~SentencePieceAdapter() = default;

std::unique_ptr<SentencePieceAdapter> SentencePieceAdapter::Load(const std::string& path, std::string* error) {
  const ModuleApi& api = Api();
  if (!api.error.empty()) {
    *error = api.error;
    return nullptr;
  }
  char message[512] = {0};
  void* handle = api.load(path.c_str(), message, sizeof(message));
  if (handle == nullptr) {
    *error = message;
    return nullptr;
  }
  auto impl = std::make_unique<Impl>();
  impl->handle = handle;
  return std::unique_ptr<SentencePieceAdapter>(new SentencePieceAdapter(std::move(impl)));
}

bool SentencePieceAdapter::Encode(const std::string& text, std::vector<int>* ids, std::string* error) const {
  int* buffer = nullptr;
  size_t count = 0;
  char message[512] = {0};
  if (Api().encode(impl_->handle, text.data(), text.size(), &buffer, &count, message, sizeof(message)) != 0) {
    *error = message;
    return false;
  }
  ids->assign(buffer, buffer + count);
  Api().free_buffer(buffer);
  return true;
}

std::string SentencePieceAdapter::Decode(const std::vector<int>& ids) const {
  char* buffer = nullptr;
  size_t length = 0;
  if (Api().decode(impl_->handle, ids.data(), ids.size(), &buffer, &length) != 0) return "";
  std::string text(buffer, length);
  Api().free_buffer(buffer);
  return text;
}

int SentencePieceAdapter::bos_id() const { return Api().bos_id(impl_->handle); }
int SentencePieceAdapter::eos_id() const { return Api().eos_id(impl_->handle); }
int SentencePieceAdapter::piece_size() const { return Api().piece_size(impl_->handle); }

}  // namespace quark::runtime
