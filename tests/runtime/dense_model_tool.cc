// Writes the Qwen3 / Phi-3 test models of dense_arch_models.h to a folder, for the llama.cpp cross-check
// (tests/node/gguf_dense_consumer_test.mjs):
//   dense_model_tool qwen3|phi3|phi3-mha DONOR_DIR OUT_DIR   (DONOR_DIR: a trained Llama, e.g. fixtures/tinyllama-a;
//   phi3-mha: one KV head per query head, each a copy of the one it read: the same function, square attention)
#include <iostream>
#include <string>

#include "tests/runtime/dense_arch_models.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: dense_model_tool qwen3|phi3|phi3-mha DONOR_DIR OUT_DIR\n";
    return 2;
  }
  const std::string arch = argv[1];
  const bool mha = arch == "phi3-mha";
  if (auto status = quark::runtime::testing::TransplantTinyLlama(argv[2], mha ? "phi3" : arch, argv[3], mha);
      !status.ok()) {
    std::cerr << "dense_model_tool: " << status << "\n";
    return 1;
  }
  std::cout << "wrote " << argv[1] << " to " << argv[3] << "\n";
  return 0;
}
