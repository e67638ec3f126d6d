// The GGUF export of the MoE architectures (mixtral, qwen2_moe, qwen3_moe) on small seeded models: each layer's
// experts stacked into llama.cpp's 3-D tensors and read back per expert as the checkpoint's; the routing gates F32
// whatever the type; engine codes of every expert in one block type; the metadata llama.cpp reads; refusals of
// what llama.cpp would compute differently (a layer's experts of different types, the other top-k normalization).
// llama.cpp itself loads these files and matches the engine's perplexity in tests/node/gguf_moe_consumer_test.mjs.
#include <filesystem>
#include <fstream>
#include <map>

#include <gtest/gtest.h>

#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/model_layout.h"
#include "core/export/gguf_file.h"
#include "core/export/gguf_model.h"
#include "core/export/gguf_moe.h"
#include "core/export/gguf_source.h"
#include "core/export/hf_quark_layout.h"
#include "core/numerics/real_quant.h"
#include "core/runtime/weight_source.h"
#include "tests/export/gguf_moe_models.h"
#include "tests/export/gguf_test_util.h"
#include "tests/quantize/test_model.h"

namespace quark::exporter {
namespace {

namespace fs = std::filesystem;
using gguf::GgmlType;

const char* const kArchs[] = {"mixtral", "qwen2_moe", "qwen3_moe"};

std::string SmallMoe(const std::string& arch) {
  const std::string dir = testing::TempPath("quark_gguf_moe_" + arch);
  auto status = testing::WriteSmallMoeModel(arch, dir, testing::FixturePath("stories260K/tokenizer.model"));
  EXPECT_TRUE(status.ok()) << status;
  return dir;
}

absl::StatusOr<std::string> Export(const std::string& model, std::optional<GgmlType> type, const Config& config = {},
                                   std::function<void(const LinearExportData&)> on_linear = nullptr) {
  testing::GgufTestExport job;
  job.model_dir = model;
  job.output_file = model + ".out/model.gguf";
  fs::create_directories(model + ".out");
  job.config = config;
  job.options.type = type;
  job.on_linear = std::move(on_linear);
  auto files = testing::ExportGguf(job);
  if (!files.ok()) return files.status();
  return job.output_file;
}

void RemoveModel(const std::string& model) {
  fs::remove_all(model);
  fs::remove_all(model + ".out");
}

TEST(GgufMoeTest, ExpertsAreStackedAndReadBackAsTheCheckpoint) {
  for (const std::string arch : kArchs) {
    SCOPED_TRACE(arch);
    const std::string model = SmallMoe(arch);
    auto file = Export(model, GgmlType::kF32);
    ASSERT_TRUE(file.ok()) << file.status();
    auto source = GgufWeightSource::Open(*file);
    ASSERT_TRUE(source.ok()) << source.status();
    const gguf::GgufFile& f = (*source)->file();
    const std::string gguf_arch = arch == "mixtral" ? "llama" : arch == "qwen2_moe" ? "qwen2moe" : "qwen3moe";
    EXPECT_EQ(*f.GetString("general.architecture"), gguf_arch);
    EXPECT_EQ(*f.GetInt(gguf_arch + ".expert_count"), 4);
    EXPECT_EQ(*f.GetInt(gguf_arch + ".expert_used_count"), 2);
    EXPECT_EQ(f.Find(gguf_arch + ".expert_feed_forward_length") != nullptr, arch != "mixtral");
    EXPECT_EQ(f.Find(gguf_arch + ".expert_shared_feed_forward_length") != nullptr, arch == "qwen2_moe");
    // Per layer: 3 stacked expert tensors {in, out, 4}, the router {64, 4}; all F32 here.
    for (int layer = 0; layer < 2; ++layer) {
      const std::string blk = "blk." + std::to_string(layer) + ".";
      for (const char* proj : {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"}) {
        const gguf::TensorInfo* t = f.FindTensor(blk + proj + ".weight");
        ASSERT_NE(t, nullptr) << proj;
        EXPECT_EQ(t->ne, (std::vector<int64_t>{64, 64, 4})) << proj;
        EXPECT_EQ(t->type, GgmlType::kF32);
      }
      ASSERT_NE(f.FindTensor(blk + "ffn_gate_inp.weight"), nullptr);
      EXPECT_EQ(f.FindTensor(blk + "ffn_gate_inp.weight")->ne, (std::vector<int64_t>{64, 4}));
      EXPECT_EQ(f.FindTensor(blk + "ffn_gate_inp_shexp.weight") != nullptr, arch == "qwen2_moe");
      EXPECT_EQ(f.FindTensor(blk + "ffn_up_shexp.weight") != nullptr, arch == "qwen2_moe");
      EXPECT_EQ(f.FindTensor(blk + "attn_q_norm.weight") != nullptr, arch == "qwen3_moe");
      EXPECT_EQ(f.FindTensor(blk + "attn_q.bias") != nullptr, arch == "qwen2_moe");
      EXPECT_EQ(f.FindTensor(blk + "ffn_gate.weight"), nullptr);  // no dense MLP
    }
    // Config round trip and every HF tensor (each expert its slice) equal to the checkpoint's.
    auto config = checkpoint::LoadModelConfig(model);
    ASSERT_TRUE(config.ok());
    const checkpoint::ModelConfig& c = (*source)->config();
    EXPECT_EQ(c.model_type, arch);
    EXPECT_EQ(c.num_experts, config->num_experts);
    EXPECT_EQ(c.num_experts_per_tok, config->num_experts_per_tok);
    EXPECT_EQ(c.moe_intermediate_size, config->moe_intermediate_size);
    EXPECT_EQ(c.shared_expert_intermediate_size, config->shared_expert_intermediate_size);
    EXPECT_EQ(c.norm_topk_prob, config->norm_topk_prob);
    EXPECT_EQ(c.qk_norm, config->qk_norm);
    EXPECT_EQ(c.attention_bias, config->attention_bias);
    auto reader = checkpoint::CheckpointReader::Open(model);
    runtime::CheckpointWeightSource original(std::move(*reader));
    const auto specs = checkpoint::ModelTensors(*config);
    EXPECT_EQ(f.tensors().size(), specs.size() - 2 * 3 * (4 - 1));  // 4 experts -> 1 tensor, 3 projections, 2 layers
    for (const auto& spec : specs) {
      auto a = original.Get(spec.name, at::kFloat);
      auto b = (*source)->Get(spec.name, at::kFloat);
      ASSERT_TRUE(a.ok() && b.ok()) << spec.name << ": " << b.status();
      EXPECT_TRUE(at::equal(*a, *b)) << spec.name;
    }
    const std::string expert4 = arch == "mixtral" ? "model.layers.0.block_sparse_moe.experts.4.w1.weight"
                                                  : "model.layers.0.mlp.experts.4.gate_proj.weight";
    EXPECT_FALSE((*source)->Has(expert4));
    EXPECT_EQ((*source)->Get(expert4, at::kFloat).status().code(), absl::StatusCode::kNotFound);
    // Expert 2's slice is where the stacked layout puts it: byte 2 * (64 * 64 * 4) of ffn_down_exps.
    const gguf::TensorInfo* down = f.FindTensor("blk.1.ffn_down_exps.weight");
    at::Tensor stored = at::from_blob(const_cast<uint8_t*>(f.TensorData(*down)) + 2 * 64 * 64 * 4, {64, 64}, at::kFloat);
    const std::string down2 = arch == "mixtral" ? "model.layers.1.block_sparse_moe.experts.2.w2.weight"
                                                : "model.layers.1.mlp.experts.2.down_proj.weight";
    EXPECT_TRUE(at::equal(stored, *original.Get(down2, at::kFloat)));
    RemoveModel(model);
  }
}

TEST(GgufMoeTest, QuantizedExpertsShareOneBlockTypeAndGatesStayF32) {
  for (const std::string arch : kArchs) {
    SCOPED_TRACE(arch);
    const std::string model = SmallMoe(arch);
    // llama-quantize's way: every 2-D weight Q8_0 except the gates.
    auto file = Export(model, GgmlType::kQ8_0);
    ASSERT_TRUE(file.ok()) << file.status();
    {
      auto f = gguf::GgufFile::Open(*file);
      ASSERT_TRUE(f.ok());
      EXPECT_EQ((*f)->FindTensor("blk.0.ffn_up_exps.weight")->type, GgmlType::kQ8_0);
      EXPECT_EQ((*f)->FindTensor("blk.0.ffn_gate_inp.weight")->type, GgmlType::kF32);
      if (arch == "qwen2_moe") {
        EXPECT_EQ((*f)->FindTensor("blk.0.ffn_gate_inp_shexp.weight")->type, GgmlType::kF32);
        EXPECT_EQ((*f)->FindTensor("blk.0.ffn_down_shexp.weight")->type, GgmlType::kQ8_0);
      }
    }
    // Engine codes of every expert in the block type of their scheme, read back per expert: Q4_0 exactly, Q4_1 / Q8_0
    // within the fp16 rounding of m / d (as gguf_export_test's EngineCodesGoInAsQuarksMapping).
    const struct {
      std::string preset;
      GgmlType type;
      double codes_span;  // 0: exact
    } schemes[] = {{"int8_wo_32", GgmlType::kQ8_0, 128}, {"int4_wo_32", GgmlType::kQ4_0, 0},
                   {"uint4_wo_32", GgmlType::kQ4_1, 15}};
    for (const auto& scheme : schemes) {
      SCOPED_TRACE(scheme.preset);
      fs::remove_all(model + ".out");
      auto config = testing::GgufTestConfig(scheme.preset);
      ASSERT_TRUE(config.ok());
      std::map<std::string, at::Tensor> expected;
      std::map<std::string, float> max_scale;
      file = Export(model, std::nullopt, *config, [&](const LinearExportData& d) {
        auto w = Dequantize(d.weight_codes, *d.config.weight, at::kFloat);
        ASSERT_TRUE(w.ok());
        expected[d.module + ".weight"] = *w;
        max_scale[d.module + ".weight"] = d.weight_codes.scale.abs().max().item<float>();
      });
      ASSERT_TRUE(file.ok()) << file.status();
      const size_t per_layer = 4 + 4 * 3 + (arch == "qwen2_moe" ? 3 : 0);
      EXPECT_EQ(expected.size(), 2 * per_layer);
      auto source = GgufWeightSource::Open(*file);
      ASSERT_TRUE(source.ok()) << source.status();
      for (const auto& [name, want] : expected) {
        EXPECT_EQ((*source)->file().FindTensor(gguf::GgufTensorSlot(name).name)->type, scheme.type) << name;
        auto got = (*source)->Get(name, at::kFloat);
        ASSERT_TRUE(got.ok()) << name;
        EXPECT_LE((*got - want).abs().max().item<double>(), max_scale[name] * scheme.codes_span / 2048.0) << name;
      }
      EXPECT_EQ((*source)->file().FindTensor("blk.1.ffn_gate_inp.weight")->type, GgmlType::kF32);
    }
    RemoveModel(model);
  }
}

TEST(GgufMoeTest, RefusesWhatLlamaCppWouldComputeDifferently) {
  // One expert left float while the others are Q4_0: a stacked tensor has one type.
  const std::string model = SmallMoe("mixtral");
  auto config = testing::GgufTestConfig("int4_wo_32", {"*experts.2.*"});
  ASSERT_TRUE(config.ok());
  auto file = Export(model, std::nullopt, *config);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument) << file.status();
  const std::string message(file.status().message());
  EXPECT_NE(message.find("blk.0.ffn_gate_exps.weight: expert 2"), std::string::npos) << message;
  EXPECT_NE(message.find("Q4_0"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(model + ".out/model.gguf"));
  EXPECT_FALSE(fs::exists(model + ".out/model.gguf.partial"));
  RemoveModel(model);
  // The top-k normalization llama.cpp's architecture does not do: refused naming norm_topk_prob, before writing.
  for (const std::string arch : {"qwen2_moe", "qwen3_moe"}) {
    const std::string dir = SmallMoe(arch);
    auto c = checkpoint::LoadModelConfig(dir);
    ASSERT_TRUE(c.ok()) << c.status();
    c->norm_topk_prob = !c->norm_topk_prob;
    { std::ofstream(dir + "/config.json") << checkpoint::ModelConfigToJson(*c); }
    ASSERT_EQ(checkpoint::LoadModelConfig(dir)->norm_topk_prob, c->norm_topk_prob);
    auto refused = Export(dir, GgmlType::kF32);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << arch << ": " << refused.status();
    EXPECT_NE(std::string(refused.status().message()).find("norm_topk_prob"), std::string::npos) << refused.status();
    EXPECT_FALSE(fs::exists(dir + ".out/model.gguf.partial"));
    RemoveModel(dir);
  }
}

// llama.cpp's qwen2moe requires output.weight: a tied model gets its embedding written there, and reads back untied
// with the same head.
TEST(GgufMoeTest, TiedQwen2MoeGetsTheEmbeddingAsOutput) {
  const std::string model = testing::TempPath("quark_gguf_moe_tied");
  ASSERT_TRUE(testing::WriteSmallMoeModel("qwen2_moe", model, testing::FixturePath("stories260K/tokenizer.model"),
                                          /*tied=*/true).ok());
  auto file = Export(model, GgmlType::kF32);
  ASSERT_TRUE(file.ok()) << file.status();
  auto source = GgufWeightSource::Open(*file);
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_FALSE((*source)->config().tie_word_embeddings);
  auto head = (*source)->Get("lm_head.weight", at::kFloat);
  auto embed = (*source)->Get("model.embed_tokens.weight", at::kFloat);
  ASSERT_TRUE(head.ok() && embed.ok());
  EXPECT_TRUE(at::equal(*head, *embed));
  RemoveModel(model);
}

TEST(GgufMoeTest, Names) {
  using gguf::GgufTensorSlot;
  EXPECT_EQ(GgufTensorSlot("model.layers.3.block_sparse_moe.experts.5.w1.weight").name, "blk.3.ffn_gate_exps.weight");
  EXPECT_EQ(GgufTensorSlot("model.layers.3.block_sparse_moe.experts.5.w1.weight").expert, 5);
  EXPECT_EQ(GgufTensorSlot("model.layers.3.block_sparse_moe.experts.5.w3.weight").name, "blk.3.ffn_up_exps.weight");
  EXPECT_EQ(GgufTensorSlot("model.layers.3.block_sparse_moe.experts.5.w2.weight").name, "blk.3.ffn_down_exps.weight");
  EXPECT_EQ(GgufTensorSlot("model.layers.0.mlp.experts.11.down_proj.weight").name, "blk.0.ffn_down_exps.weight");
  EXPECT_EQ(GgufTensorSlot("model.layers.0.mlp.experts.11.down_proj.weight").expert, 11);
  EXPECT_EQ(GgufTensorSlot("model.layers.0.block_sparse_moe.gate.weight").name, "blk.0.ffn_gate_inp.weight");
  EXPECT_EQ(GgufTensorSlot("model.layers.0.mlp.gate.weight").name, "blk.0.ffn_gate_inp.weight");
  EXPECT_EQ(GgufTensorSlot("model.layers.0.mlp.gate.weight").expert, -1);
  EXPECT_EQ(GgufTensorSlot("model.layers.2.mlp.shared_expert_gate.weight").name, "blk.2.ffn_gate_inp_shexp.weight");
  EXPECT_EQ(GgufTensorSlot("model.layers.2.mlp.shared_expert.up_proj.weight").name, "blk.2.ffn_up_shexp.weight");
  EXPECT_EQ(GgufTensorSlot("model.layers.2.self_attn.k_norm.weight").name, "blk.2.attn_k_norm.weight");
  EXPECT_EQ(GgufTensorSlot("model.layers.2.mlp.down_proj.weight").name, "blk.2.ffn_down.weight");  // dense
  EXPECT_EQ(GgufTensorSlot("model.layers.2.mlp.experts.1.fc1.weight").name, "");
  checkpoint::ModelConfig mixtral, qwen;
  mixtral.model_type = "mixtral";
  mixtral.num_attention_heads = 4;
  qwen.model_type = "qwen3_moe";
  qwen.num_attention_heads = 4;
  EXPECT_EQ(gguf::PermutedHeads(mixtral, "model.layers.0.self_attn.q_proj.weight"), 4);
  EXPECT_EQ(gguf::PermutedHeads(qwen, "model.layers.0.self_attn.q_proj.weight"), 0);
  EXPECT_TRUE(gguf::KeptInF32("blk.0.ffn_gate_inp.weight"));
  EXPECT_TRUE(gguf::KeptInF32("blk.0.ffn_gate_inp_shexp.weight"));
  EXPECT_FALSE(gguf::KeptInF32("blk.0.ffn_gate_exps.weight"));
}

}  // namespace
}  // namespace quark::exporter
