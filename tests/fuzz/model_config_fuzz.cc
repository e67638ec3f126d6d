// libFuzzer target for the HF config.json reader (core/checkpoint/model_config.cc): a model folder is outside
// input. A config that reads must describe a buildable model (the sizes the runtime divides by are positive and
// divide) and must come back unchanged through ModelConfigToJson.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/checkpoint/model_config.h"

namespace {

void Check(bool condition) {
  if (!condition) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = quark::checkpoint::ParseModelConfig(text, "fuzz/config.json");
  if (!config.ok()) return 0;
  Check(config->hidden_size > 0 && config->num_hidden_layers > 0 && config->num_attention_heads > 0 &&
        config->num_key_value_heads > 0 && config->head_dim > 0 && config->vocab_size > 0);
  Check(config->num_attention_heads % config->num_key_value_heads == 0);
  for (int64_t layer = 0; layer < config->num_hidden_layers && layer < 64; ++layer) {
    Check(quark::checkpoint::LayerAttentionWindow(*config, layer) >= 0);
  }
  const std::string json = quark::checkpoint::ModelConfigToJson(*config);
  auto again = quark::checkpoint::ParseModelConfig(json, "fuzz/config.json (written)");
  Check(again.ok() && quark::checkpoint::ModelConfigToJson(*again) == json);
  return 0;
}
