#include "tests/estimate/synthetic_model.h"

#include <cstring>
#include <fstream>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "core/checkpoint/checkpoint_writer.h"
#include "core/checkpoint/model_layout.h"

namespace quark::estimate::testing {

void WriteBf16Llama(const std::string& dir, int64_t hidden, int64_t intermediate, int64_t layers) {
  checkpoint::ModelConfig c;
  c.model_type = "llama";
  c.hidden_size = hidden;
  c.intermediate_size = intermediate;
  c.num_hidden_layers = layers;
  c.num_attention_heads = hidden / 64;
  c.num_key_value_heads = hidden / 64;
  c.head_dim = 64;
  c.vocab_size = 512;
  c.max_position_embeddings = 256;
  c.bos_token_id = 1;
  c.eos_token_id = 2;
  c.torch_dtype = "bfloat16";
  const auto tensors = checkpoint::ModelTensors(c);
  std::vector<checkpoint::PlannedTensor> plan;
  for (const auto& t : tensors) plan.push_back({t.name, checkpoint::StDType::kBF16, t.shape});
  auto writer = checkpoint::CheckpointWriter::Create(dir, plan);
  ASSERT_TRUE(writer.ok()) << writer.status();
  std::mt19937 random(7);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (const auto& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    std::string bytes(n * 2, '\0');
    for (int64_t i = 0; i < n; ++i) {
      const float v = t.role == checkpoint::TensorRole::kNormWeight ? 1.0f : normal(random);
      uint32_t bits = 0;
      std::memcpy(&bits, &v, 4);
      const uint16_t bf16 = static_cast<uint16_t>(bits >> 16);  // truncation: any bf16 value will do
      std::memcpy(&bytes[2 * i], &bf16, 2);
    }
    ASSERT_TRUE((*writer)->Write(t.name, bytes).ok()) << t.name;
  }
  ASSERT_TRUE((*writer)->Finish().ok());
  std::ofstream(dir + "/config.json") << checkpoint::ModelConfigToJson(c);
}

}  // namespace quark::estimate::testing
