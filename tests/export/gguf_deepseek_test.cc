// The deepseek2 GGUF export (#32) without llama.cpp: what it refuses (naming the field), its layout (MLA's kv_b split,
// stacked experts, no MTP tensors, metadata), and the read-back that the engine evaluates exports with: F32 gives the
// checkpoint's weights back bit for bit. llama.cpp's side is tests/node/gguf_deepseek_consumer_test.mjs.
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/deepseek_layout.h"
#include "core/export/gguf_deepseek.h"
#include "core/export/hf_quark_moe_rules.h"
#include "core/runtime/deepseek_synthetic.h"
#include "core/runtime/synthetic_model.h"
#include "tests/runtime/deepseek_test_models.h"
#include "tests/runtime/test_paths.h"

namespace quark::exporter::gguf {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class GgufDeepseekTest : public ::testing::Test {
 protected:
  void SetUp() override {
    runtime::testing::InitTestEngine();
    dir_ = model_.dir;
    weights_ = model_.weights;
    config_ = model_.config;
    auto vocab = ReadSentencePieceVocab(runtime::testing::Stories260K() + "/tokenizer.model");
    ASSERT_TRUE(vocab.ok()) << vocab.status();
    vocab_ = *vocab;
  }

  const runtime::testing::TinyDeepseek model_{"gguf", 2};
  fs::path dir_;
  std::shared_ptr<runtime::CheckpointWeightSource> weights_;
  checkpoint::DeepseekConfig config_;
  SentencePieceVocab vocab_;
};

TEST_F(GgufDeepseekTest, RefusesWhatDeepseek2CannotExpressNamingTheField) {
  const std::string file = (dir_ / "x.gguf").string();
  // The tiny shape's mscale 1 with mscale_all_dim 0.8 scales RoPE's cos/sin by 1.025: llama.cpp cannot.
  auto refused = WriteDeepseekGguf(config_, *weights_, vocab_, GgmlType::kF32, file);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("\"rope_scaling.mscale\" = 1 with mscale_all_dim = 0.8"));
  config_.yarn->mscale_all_dim = 1.0;
  config_.rope_interleave = false;
  EXPECT_THAT(std::string(WriteDeepseekGguf(config_, *weights_, vocab_, GgmlType::kF32, file).message()),
              HasSubstr("\"rope_interleave\" = false"));
  config_.rope_interleave = true;
  EXPECT_THAT(std::string(WriteDeepseekGguf(config_, *weights_, vocab_, GgmlType::kQ4_0, file).message()),
              HasSubstr("F32 or Q8_0"));
  checkpoint::DeepseekConfig plain_q = *runtime::DeepseekSyntheticConfig("tiny-q-proj", "float32");
  EXPECT_THAT(std::string(WriteDeepseekGguf(plain_q, *weights_, vocab_, GgmlType::kF32, file).message()),
              HasSubstr("\"q_lora_rank\" = null with num_hidden_layers = 3"));
  checkpoint::DeepseekConfig narrow = config_;
  narrow.base.vocab_size = 256;
  EXPECT_THAT(std::string(WriteDeepseekGguf(narrow, *weights_, vocab_, GgmlType::kF32, file).message()),
              HasSubstr("512 pieces, more than vocab_size = 256"));
}

TEST_F(GgufDeepseekTest, F32ReadsBackBitForBitWithoutTheMtpLayer) {
  config_.yarn->mscale_all_dim = config_.yarn->mscale;
  const std::string file = (dir_ / "f32.gguf").string();
  ASSERT_TRUE(WriteDeepseekGguf(config_, *weights_, vocab_, GgmlType::kF32, file).ok());
  auto gguf = GgufFile::Open(file);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  EXPECT_EQ(*(*gguf)->GetString("general.architecture"), "deepseek2");
  EXPECT_EQ(*(*gguf)->GetInt("deepseek2.attention.head_count_kv"), 1);
  EXPECT_EQ(*(*gguf)->GetInt("deepseek2.attention.key_length"), 32 + 8);
  EXPECT_EQ(*(*gguf)->GetInt("deepseek2.attention.key_length_mla"), 24);
  EXPECT_EQ(*(*gguf)->GetInt("deepseek2.expert_group_used_count"), 2);
  EXPECT_EQ(*(*gguf)->GetInt("deepseek2.leading_dense_block_count"), 1);
  // kv_b [H * (nope + v), kv_lora] as k_b {nope, kv_lora, H} and v_b {kv_lora, v, H}; experts stacked.
  EXPECT_EQ((*gguf)->FindTensor("blk.1.attn_k_b.weight")->ne, (std::vector<int64_t>{16, 32, 4}));
  EXPECT_EQ((*gguf)->FindTensor("blk.1.attn_v_b.weight")->ne, (std::vector<int64_t>{32, 16, 4}));
  EXPECT_EQ((*gguf)->FindTensor("blk.2.ffn_down_exps.weight")->ne, (std::vector<int64_t>{32, 64, 16}));
  EXPECT_NE((*gguf)->FindTensor("blk.2.exp_probs_b.bias"), nullptr);
  EXPECT_EQ((*gguf)->FindTensor("blk.0.ffn_gate_inp.weight"), nullptr);  // the dense layer
  for (const TensorInfo& t : (*gguf)->tensors()) EXPECT_EQ(t.name.find("blk.3."), std::string::npos) << t.name;
  auto read = DeepseekWeightsFromGguf(config_, **gguf);
  ASSERT_TRUE(read.ok()) << read.status();
  int64_t compared = 0;
  for (const checkpoint::TensorSpec& spec : checkpoint::DeepseekModelTensors(config_)) {
    if (checkpoint::IsDeepseekMtpTensor(config_, spec.name)) continue;
    EXPECT_TRUE(at::equal(*(*read)->Get(spec.name, at::kFloat), *weights_->Get(spec.name, at::kFloat))) << spec.name;
    ++compared;
  }
  EXPECT_GT(compared, 100);
  // A config that disagrees with the file: the tensor and both shapes are named.
  checkpoint::DeepseekConfig wrong = config_;
  wrong.v_head_dim = 8;
  EXPECT_THAT(std::string(DeepseekWeightsFromGguf(wrong, **gguf).status().message()),
              HasSubstr("\"model.layers.0.self_attn.kv_b_proj.weight\" reads as [128, 32] but config.json implies [96, 32]"));
}

TEST(DeepseekVllmRulesTest, FusedGroupsAndExpertsMustAgree) {
  const checkpoint::DeepseekConfig config = *runtime::DeepseekSyntheticConfig("tiny", "float32");
  const nlohmann::ordered_json int4 = {{"weight", {{"dtype", "uint4"}, {"group_size", 128}}}};
  const nlohmann::ordered_json fp8 = {{"weight", {{"dtype", "fp8_e4m3"}}}};
  nlohmann::ordered_json qc = {{"global_quant_config", fp8}, {"layer_quant_config", nlohmann::ordered_json::object()},
                               {"exclude", {"lm_head"}}};
  EXPECT_THAT(DeepseekConfigProblems(qc, config), ::testing::IsEmpty());
  qc["layer_quant_config"]["*q_a_proj"] = int4;
  qc["layer_quant_config"]["*mlp.experts.5.down_proj"] = int4;
  qc["exclude"].push_back("model.layers.0.mlp.up_proj");
  const auto problems = DeepseekConfigProblems(qc, config);
  // Every layer's kv_a_proj_with_mqa, the dense layer's up_proj, expert 5's down_proj in each of the two MoE layers.
  ASSERT_EQ(problems.size(), 3u + 1 + 2) << ::testing::PrintToString(problems);
  EXPECT_THAT(problems[0], HasSubstr("model.layers.0.self_attn.kv_a_proj_with_mqa: resolves to a config different from "
                                     "model.layers.0.self_attn.q_a_proj (vLLM fuses them into fused_qkv_a_proj)"));
  EXPECT_THAT(problems[1], HasSubstr("model.layers.0.mlp.up_proj: excluded differently from model.layers.0.mlp.gate_proj"));
  EXPECT_THAT(::testing::PrintToString(problems), HasSubstr("model.layers.1.mlp.experts.5.down_proj: resolves to a config "
                                                            "different from model.layers.1.mlp.experts.0.down_proj"));
}

}  // namespace
}  // namespace quark::exporter::gguf
