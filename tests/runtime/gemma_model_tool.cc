// Writes tinyllama-a transplanted into a Gemma layout (tests/runtime/gemma_models.h), for the llama.cpp cross-check
// (tests/node/gguf_gemma_consumer_test.mjs).
// Usage: gemma_model_tool <gemma2|gemma3_text> <tinyllama-a dir> <out dir> <sliding window>
#include <cstdlib>
#include <iostream>
#include <string>

#include "tests/runtime/gemma_models.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: gemma_model_tool <gemma2|gemma3_text> <tinyllama-a dir> <out dir> <sliding window>\n";
    return 2;
  }
  const int64_t window = std::atoll(argv[4]);
  auto config = quark::runtime::testing::TransplantTinyLlamaToGemma(argv[2], argv[1], argv[3], window);
  if (!config.ok()) {
    std::cerr << config.status() << "\n";
    return 1;
  }
  std::cout << "wrote " << argv[1] << " (" << config->num_hidden_layers << " layers, window " << window << ") to "
            << argv[3] << "\n";
  return 0;
}
