// The real llama.cpp for the GGUF tests: node-llama-cpp's prebuilt libggml-base / libllama (installed by
// scripts/install-test-peers.sh under tests/peers/node_modules), loaded with dlopen. The tests compare the
// exporter's bytes with what llama.cpp's own code computes from the same inputs; nothing of llama.cpp is copied.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace quark::testing {

struct LlamaCpp {
  // libggml-base (ggml.h / ggml-quants.h)
  void (*quantize_row_q8_0_ref)(const float* x, void* y, int64_t k) = nullptr;
  void (*quantize_row_q4_0_ref)(const float* x, void* y, int64_t k) = nullptr;
  void (*quantize_row_q4_1_ref)(const float* x, void* y, int64_t k) = nullptr;
  size_t (*quantize_chunk)(int type, const float* src, void* dst, int64_t start, int64_t nrows, int64_t n_per_row,
                           const float* imatrix) = nullptr;
  void (*dequantize_row_q8_0)(const void* x, float* y, int64_t k) = nullptr;
  void (*dequantize_row_q4_0)(const void* x, float* y, int64_t k) = nullptr;
  void (*dequantize_row_q4_1)(const void* x, float* y, int64_t k) = nullptr;
  void (*fp32_to_fp16_row)(const float* x, uint16_t* y, int64_t n) = nullptr;
  void (*fp16_to_fp32_row)(const uint16_t* x, float* y, int64_t n) = nullptr;
  void (*fp32_to_bf16_row_ref)(const float* x, uint16_t* y, int64_t n) = nullptr;

  /// ggml's own kernels of one block type: quantize_row_<t>_ref, quantize_<t> (with quant weights, or null) and
  /// dequantize_row_<t>.
  struct TypeFns {
    void (*quantize_row_ref)(const float* x, void* y, int64_t k) = nullptr;
    size_t (*quantize)(const float* src, void* dst, int64_t nrow, int64_t n_per_row, const float* qw) = nullptr;
    void (*dequantize_row)(const void* x, float* y, int64_t k) = nullptr;
  };
  /// By ggml type id: Q4_0, Q4_1, Q5_0, Q5_1, Q2_K..Q6_K, IQ4_NL, IQ4_XS.
  std::map<int, TypeFns> kquants;

  /// llama-quantize on a file: `ftype` a llama_ftype (2 Q4_0, 3 Q4_1, 7 Q8_0), `pure` as --pure. Returns 0 on
  /// success (llama_model_quantize's result). Set only when libllama loaded too.
  uint32_t (*model_quantize)(const std::string& in, const std::string& out, int ftype, bool pure) = nullptr;
  /// The same with an importance matrix (llama_model_imatrix_data: tensor name -> quant weights, experts' slices
  /// one after another), as llama-quantize --imatrix passes what load_imatrix read.
  uint32_t (*model_quantize_imatrix)(const std::string& in, const std::string& out, int ftype,
                                     const std::map<std::string, std::vector<float>>& imatrix) = nullptr;
  /// llama.cpp's loader on a GGUF file (llama_model_load_from_file, default params, CPU): "" when the model loads,
  /// else why; `n_params` gets llama_model_n_params. Set only when libllama loaded.
  std::string (*load_model)(const std::string& path, uint64_t* n_params) = nullptr;
};

/// The loaded libraries, or nullptr with `why` set (not installed, or a symbol missing).
const LlamaCpp* LoadLlamaCpp(std::string* why);

/// The folder of node-llama-cpp's prebuilt libraries ($QUARK_SOURCE_DIR/tests/peers/...).
std::string LlamaCppLibDir();

}  // namespace quark::testing
