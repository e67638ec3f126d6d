// Qwen3 and Phi-3 in GGUF (#18): the F32 export of tinyllama-a transplanted into each layout reads back as the
// checkpoint (every tensor equal, the config's q/k norms / fused layout restored from general.architecture), under
// llama.cpp's names (attn_q_norm / attn_k_norm; attn_qkv and ffn_up = gate|up) and without the Llama Q/K row
// permutation. What llama.cpp itself computes on these files is tests/node/gguf_dense_consumer_test.mjs.
#include <filesystem>

#include <gtest/gtest.h>

#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/model_layout.h"
#include "core/export/gguf_model.h"
#include "core/export/gguf_source.h"
#include "core/runtime/weight_source.h"
#include "tests/export/gguf_test_util.h"
#include "tests/quantize/test_model.h"
#include "tests/runtime/dense_arch_models.h"

namespace quark::exporter {
namespace {

namespace fs = std::filesystem;

at::Tensor Stored(const gguf::GgufFile& file, const std::string& name) {
  const gguf::TensorInfo* t = file.FindTensor(name);
  EXPECT_NE(t, nullptr) << name;
  if (t == nullptr) return {};
  return at::from_blob(const_cast<uint8_t*>(file.TensorData(*t)), {t->ne[1], t->ne[0]}, at::kFloat).clone();
}

class GgufDenseTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufDenseTest, F32FileReadsBackAsTheCheckpointUnderLlamaCppNames) {
  const std::string arch = GetParam();
  const std::string model = testing::TempPath("gguf_dense_" + arch);
  ASSERT_TRUE(runtime::testing::TransplantTinyLlama(testing::FixturePath("tinyllama-a"), arch, model).ok());
  testing::GgufTestExport job;
  job.model_dir = model;
  const std::string dir = testing::TempPath("gguf_dense_out_" + arch);
  fs::create_directories(dir);
  job.output_file = dir + "/model.gguf";
  job.options.type = gguf::GgmlType::kF32;
  auto files = testing::ExportGguf(job);
  ASSERT_TRUE(files.ok()) << files.status();

  auto source = GgufWeightSource::Open(job.output_file);
  ASSERT_TRUE(source.ok()) << source.status();
  const checkpoint::ModelConfig& c = (*source)->config();
  auto config = checkpoint::LoadModelConfig(model);
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(c.model_type, arch);
  EXPECT_EQ(c.family, config->family);
  EXPECT_EQ(c.qk_norm, arch == "qwen3");
  EXPECT_EQ(c.head_dim, config->head_dim);
  EXPECT_EQ(c.num_key_value_heads, config->num_key_value_heads);
  EXPECT_EQ(c.intermediate_size, config->intermediate_size);
  EXPECT_EQ(*(*source)->file().GetString("general.architecture"), arch);
  auto reader = checkpoint::CheckpointReader::Open(model);
  ASSERT_TRUE(reader.ok());
  runtime::CheckpointWeightSource original(std::move(*reader));
  for (const auto& spec : checkpoint::ModelTensors(*config)) {
    auto a = original.Get(spec.name, at::kFloat);
    auto b = (*source)->Get(spec.name, at::kFloat);
    ASSERT_TRUE(a.ok() && b.ok()) << spec.name;
    EXPECT_TRUE(at::equal(*a, *b)) << spec.name;
  }
  const gguf::GgufFile& file = (*source)->file();
  if (arch == "qwen3") {
    // NEOX RoPE: q rows as HF stores them (a Llama GGUF would hold them interleaved).
    EXPECT_TRUE(at::equal(Stored(file, "blk.0.attn_q.weight"), *original.Get("model.layers.0.self_attn.q_proj.weight", at::kFloat)));
    ASSERT_NE(file.FindTensor("blk.3.attn_q_norm.weight"), nullptr);
    EXPECT_EQ(file.FindTensor("blk.3.attn_k_norm.weight")->ne, (std::vector<int64_t>{config->head_dim}));
  } else {
    const int64_t q = config->num_attention_heads * config->head_dim, kv = config->num_key_value_heads * config->head_dim;
    EXPECT_EQ(file.FindTensor("blk.0.attn_qkv.weight")->ne, (std::vector<int64_t>{config->hidden_size, q + 2 * kv}));
    // ffn_up holds gate | up, gate first (llama.cpp's SWIGLU takes the first half through silu).
    const at::Tensor up = Stored(file, "blk.0.ffn_up.weight");
    EXPECT_TRUE(at::equal(up.narrow(0, 0, config->intermediate_size),
                          original.Get("model.layers.0.mlp.gate_up_proj.weight", at::kFloat)->narrow(0, 0, config->intermediate_size)));
    EXPECT_EQ(file.FindTensor("blk.0.attn_q.weight"), nullptr);
    EXPECT_EQ(file.FindTensor("blk.0.ffn_gate.weight"), nullptr);
    EXPECT_EQ(*file.GetInt("phi3.attention.sliding_window"), 0);
    EXPECT_EQ(*file.GetInt("phi3.rope.scaling.original_context_length"), config->max_position_embeddings);
  }
  fs::remove_all(model);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Arches, GgufDenseTest, ::testing::Values("qwen3", "phi3"));

}  // namespace
}  // namespace quark::exporter
