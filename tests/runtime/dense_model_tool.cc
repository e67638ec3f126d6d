// Writes the Qwen3 / Phi-3 test models of dense_arch_models.h to a folder, for the llama.cpp cross-check
// (tests/node/gguf_dense_consumer_test.mjs):
//   dense_model_tool qwen3|phi3 DONOR_DIR OUT_DIR   (DONOR_DIR: a trained Llama, e.g. fixtures/tinyllama-a)
#include <iostream>
#include <string>

#include "tests/runtime/dense_arch_models.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: dense_model_tool qwen3|phi3 DONOR_DIR OUT_DIR\n";
    return 2;
  }
  if (auto status = quark::runtime::testing::TransplantTinyLlama(argv[2], argv[1], argv[3]); !status.ok()) {
    std::cerr << "dense_model_tool: " << status << "\n";
    return 1;
  }
  std::cout << "wrote " << argv[1] << " to " << argv[3] << "\n";
  return 0;
}
