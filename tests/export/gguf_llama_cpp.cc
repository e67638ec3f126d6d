#include "tests/export/gguf_llama_cpp.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>

namespace quark::testing {
namespace {

// llama.h's llama_model_quantize_params of the llama.cpp node-llama-cpp 3.22.1 was built from (its
// llama/gitRelease.bundle), filled by llama_model_quantize_default_params; spare room in case of a larger struct.
struct QuantizeParams {
  int32_t nthread;
  int32_t ftype;
  int32_t output_tensor_type;
  int32_t token_embedding_type;
  bool allow_requantize;
  bool quantize_output_tensor;
  bool only_copy;
  bool pure;
  bool keep_split;
  bool dry_run;
  const void* imatrix;
  const void* kv_overrides;
  const void* tt_overrides;
  const int32_t* prune_layers;
  size_t max_buf_size;
  char spare[256];
};

QuantizeParams (*default_params)() = nullptr;

// llama.h's llama_model_params, passed through as llama_model_default_params fills it (never read here): bytes
// enough for the struct, which is returned and passed in memory (larger than 16 bytes) either way.
struct alignas(8) ModelParams {
  char bytes[512];
};
ModelParams (*model_default_params)() = nullptr;
void* (*model_load_from_file)(const char*, ModelParams) = nullptr;
uint64_t (*model_n_params)(const void*) = nullptr;
void (*model_free)(void*) = nullptr;

std::string LoadModel(const std::string& path, uint64_t* n_params) {
  void* model = model_load_from_file(path.c_str(), model_default_params());
  if (model == nullptr) return "llama_model_load_from_file failed on " + path + " (its log is on stderr)";
  *n_params = model_n_params(model);
  model_free(model);
  return "";
}
uint32_t (*llama_quantize)(const char*, const char*, const QuantizeParams*) = nullptr;

// llama.h's llama_model_imatrix_data; an entry with a null name ends the array.
struct ImatrixData {
  const char* name;
  const float* data;
  size_t size;
};

uint32_t Quantize(const std::string& in, const std::string& out, int ftype, bool pure,
                  const std::map<std::string, std::vector<float>>* imatrix) {
  QuantizeParams params = default_params();
  params.ftype = ftype;
  params.pure = pure;
  params.nthread = 1;
  std::vector<ImatrixData> entries;
  if (imatrix) {
    for (const auto& [name, w] : *imatrix) entries.push_back({name.c_str(), w.data(), w.size()});
    entries.push_back({nullptr, nullptr, 0});
    params.imatrix = entries.data();
  }
  return llama_quantize(in.c_str(), out.c_str(), &params);
}

uint32_t ModelQuantize(const std::string& in, const std::string& out, int ftype, bool pure) {
  return Quantize(in, out, ftype, pure, nullptr);
}

uint32_t ModelQuantizeImatrix(const std::string& in, const std::string& out, int ftype,
                              const std::map<std::string, std::vector<float>>& imatrix) {
  return Quantize(in, out, ftype, false, &imatrix);
}

template <typename F>
bool Bind(void* lib, const char* name, F& f, std::string* why) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  if (f == nullptr) *why = std::string("llama.cpp: symbol ") + name + " missing";
  return f != nullptr;
}

LlamaCpp* Load(std::string* why) {
  const std::string dir = LlamaCppLibDir();
  if (!std::filesystem::exists(dir + "/libggml-base.so")) {
    *why = "node-llama-cpp's prebuilt llama.cpp is not installed (" + dir + "): run scripts/install-test-peers.sh";
    return nullptr;
  }
  void* base = dlopen((dir + "/libggml-base.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  if (base == nullptr) {
    *why = std::string("dlopen libggml-base: ") + dlerror();
    return nullptr;
  }
  auto* l = new LlamaCpp();
  bool ok = Bind(base, "quantize_row_q8_0_ref", l->quantize_row_q8_0_ref, why) &&
            Bind(base, "quantize_row_q4_0_ref", l->quantize_row_q4_0_ref, why) &&
            Bind(base, "quantize_row_q4_1_ref", l->quantize_row_q4_1_ref, why) &&
            Bind(base, "ggml_quantize_chunk", l->quantize_chunk, why) &&
            Bind(base, "dequantize_row_q8_0", l->dequantize_row_q8_0, why) &&
            Bind(base, "dequantize_row_q4_0", l->dequantize_row_q4_0, why) &&
            Bind(base, "dequantize_row_q4_1", l->dequantize_row_q4_1, why) &&
            Bind(base, "ggml_fp32_to_fp16_row", l->fp32_to_fp16_row, why) &&
            Bind(base, "ggml_fp16_to_fp32_row", l->fp16_to_fp32_row, why) &&
            Bind(base, "ggml_fp32_to_bf16_row_ref", l->fp32_to_bf16_row_ref, why);
  // ggml type id and the suffix of its kernels' names.
  const std::pair<int, const char*> kquants[] = {{2, "q4_0"}, {3, "q4_1"}, {6, "q5_0"}, {7, "q5_1"}, {10, "q2_K"}, {11, "q3_K"},   {12, "q4_K"},  {13, "q5_K"},
                                                 {14, "q6_K"}, {20, "iq4_nl"}, {23, "iq4_xs"}};
  for (const auto& [type, suffix] : kquants) {
    LlamaCpp::TypeFns& f = l->kquants[type];
    const std::string s = suffix;
    ok = ok && Bind(base, ("quantize_row_" + s + "_ref").c_str(), f.quantize_row_ref, why) &&
         Bind(base, ("quantize_" + s).c_str(), f.quantize, why) &&
         Bind(base, ("dequantize_row_" + s).c_str(), f.dequantize_row, why);
  }
  if (!ok) return nullptr;
  void* ggml = dlopen((dir + "/libggml.v0.5.0.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  void* llama = dlopen((dir + "/libllama.v0.5.0.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  void (*load_all)(const char*) = nullptr;
  void (*backend_init)() = nullptr;
  std::string ignored;
  if (ggml != nullptr && llama != nullptr && Bind(ggml, "ggml_backend_load_all_from_path", load_all, &ignored) &&
      Bind(llama, "llama_backend_init", backend_init, &ignored) &&
      Bind(llama, "llama_model_quantize_default_params", default_params, &ignored) &&
      Bind(llama, "llama_model_quantize", llama_quantize, &ignored)) {
    load_all(dir.c_str());
    backend_init();
    l->model_quantize = ModelQuantize;
    l->model_quantize_imatrix = ModelQuantizeImatrix;
    if (Bind(llama, "llama_model_default_params", model_default_params, &ignored) &&
        Bind(llama, "llama_model_load_from_file", model_load_from_file, &ignored) &&
        Bind(llama, "llama_model_n_params", model_n_params, &ignored) &&
        Bind(llama, "llama_model_free", model_free, &ignored)) {
      l->load_model = LoadModel;
    }
  }
  return l;
}

}  // namespace

std::string LlamaCppLibDir() {
  const char* source = std::getenv("QUARK_SOURCE_DIR");
  const std::string root = source ? source : ".";
  return root + "/tests/peers/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64";
}

const LlamaCpp* LoadLlamaCpp(std::string* why) {
  static std::string* failure = new std::string();
  static const LlamaCpp* loaded = Load(failure);
  if (loaded == nullptr && why != nullptr) *why = *failure;
  return loaded;
}

}  // namespace quark::testing
