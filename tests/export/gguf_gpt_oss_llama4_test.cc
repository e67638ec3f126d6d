// The gpt-oss and llama4 GGUF exports (#32) without llama.cpp: what they refuse (naming the config field), their
// layout (names, ggml shapes, types, metadata keys as convert_hf_to_gguf.py writes them), gpt-oss's gate/up
// de-interleave, MXFP4 experts, Llama 3 rope_freqs, and the read-back the engine evaluates exports with: F32 gives the
// checkpoint's weights back bit for bit. llama.cpp's side is tests/node/gguf_gpt_oss_llama4_consumer_test.mjs.
#include <cmath>
#include <filesystem>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/base/strings.h"
#include "core/checkpoint/gpt_oss_layout.h"
#include "core/checkpoint/llama4_layout.h"
#include "core/config/presets.h"
#include "core/export/gguf_gpt_oss.h"
#include "core/export/gguf_llama4.h"
#include "core/export/gguf_mxfp4.h"
#include "core/export/gguf_whole_file.h"
#include "core/numerics/fake_quant.h"
#include "core/runtime/gpt_oss_synthetic.h"
#include "core/runtime/llama4_synthetic.h"
#include "tests/runtime/test_paths.h"

namespace quark::exporter::gguf {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

runtime::TensorMapWeightSource RandomWeights(const std::vector<checkpoint::TensorSpec>& specs, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  runtime::TensorMapWeightSource out;
  for (const checkpoint::TensorSpec& s : specs) out.Set(s.name, at::randn(s.shape, gen, at::kFloat));
  return out;
}

std::string Message(const absl::Status& s) { return std::string(s.message()); }

class GgufMoeFamiliesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    runtime::testing::InitTestEngine();
    dir_ = fs::temp_directory_path() / StrCat("quark_gguf_gpt_oss_llama4_", ::getpid());
    fs::create_directories(dir_);
    auto vocab = ReadSentencePieceVocab(runtime::testing::Stories260K() + "/tokenizer.model");
    ASSERT_TRUE(vocab.ok()) << vocab.status();
    vocab_ = *vocab;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string File(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
  SentencePieceVocab vocab_;
};

checkpoint::GptOssConfig GptOss() {
  checkpoint::GptOssConfig c = *runtime::GptOssSyntheticConfig("tiny", "float32");
  c.yarn->truncate = true;
  return c;
}

TEST_F(GgufMoeFamiliesTest, GptOssRefusesWhatLlamaCppHardCodesNamingTheField) {
  const checkpoint::GptOssConfig good = GptOss();
  EXPECT_TRUE(CheckGptOssGguf(good).ok());
  checkpoint::GptOssConfig c = good;
  c.base.sliding_window_layers = {false, true, false};
  EXPECT_THAT(Message(CheckGptOssGguf(c)), HasSubstr("\"layer_types\": layer 0 is full attention"));
  c = good;
  c.swiglu_limit = 10;
  EXPECT_THAT(Message(CheckGptOssGguf(c)), HasSubstr("\"swiglu_limit\" = 10"));
  c = good;
  c.base.attention_bias = false;
  EXPECT_THAT(Message(CheckGptOssGguf(c)), HasSubstr("\"attention_bias\" = false"));
  c = good;
  c.yarn->mscale = 1;
  EXPECT_THAT(Message(CheckGptOssGguf(c)), HasSubstr("\"rope_scaling\" has mscale"));
  const auto weights = RandomWeights(checkpoint::GptOssModelTensors(good), 1);
  EXPECT_THAT(Message(WriteGptOssGguf(good, weights, vocab_, GgmlType::kQ4_0, {}, File("x.gguf"))),
              HasSubstr("F32 or Q8_0"));
  SentencePieceVocab big = vocab_;
  big.pieces.resize(600, big.pieces.back());
  EXPECT_THAT(Message(WriteGptOssGguf(good, weights, big, GgmlType::kF32, {}, File("x.gguf"))),
              HasSubstr("600 pieces, more than vocab_size = 512"));
}

TEST_F(GgufMoeFamiliesTest, GptOssLayoutAndBitExactReadBack) {
  const checkpoint::GptOssConfig c = GptOss();
  const auto weights = RandomWeights(checkpoint::GptOssModelTensors(c), 2);
  const std::string file = File("gpt_oss_f32.gguf");
  ASSERT_TRUE(WriteGptOssGguf(c, weights, vocab_, GgmlType::kF32, {}, file).ok());
  auto gguf = GgufFile::Open(file);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  const GgufFile& g = **gguf;
  EXPECT_EQ(*g.GetString("general.architecture"), "gpt-oss");
  EXPECT_EQ(*g.GetInt("gpt-oss.attention.sliding_window"), 4);
  EXPECT_EQ(*g.GetInt("gpt-oss.attention.key_length"), 16);
  EXPECT_EQ(*g.GetInt("gpt-oss.expert_feed_forward_length"), 32);
  EXPECT_EQ(*g.GetInt("gpt-oss.expert_used_count"), 2);
  EXPECT_EQ(*g.GetString("gpt-oss.rope.scaling.type"), "yarn");
  EXPECT_EQ(*g.GetInt("gpt-oss.rope.scaling.original_context_length"), 64);
  EXPECT_EQ(*g.GetFloat("gpt-oss.rope.scaling.yarn_beta_fast"), 32);
  EXPECT_EQ(g.FindTensor("blk.1.attn_sinks.weight")->ne, (std::vector<int64_t>{6}));
  EXPECT_EQ(g.FindTensor("blk.1.ffn_gate_exps.weight")->ne, (std::vector<int64_t>{64, 32, 8}));
  EXPECT_EQ(g.FindTensor("blk.1.ffn_up_exps.bias")->ne, (std::vector<int64_t>{32, 8}));
  EXPECT_EQ(g.FindTensor("blk.1.ffn_down_exps.weight")->ne, (std::vector<int64_t>{32, 64, 8}));
  EXPECT_NE(g.FindTensor("blk.2.post_attention_norm.weight"), nullptr);
  EXPECT_NE(g.FindTensor("blk.0.ffn_gate_inp.bias"), nullptr);
  EXPECT_NE(g.FindTensor("output.weight"), nullptr);
  // The converter's split: gate = HF's even gate_up columns, up = the odd ones.
  const at::Tensor gate_up = *weights.Get("model.layers.1.mlp.experts.gate_up_proj", at::kFloat);  // [E, in, 2I]
  const at::Tensor gate = *DequantizedGgufTensor(g, "blk.1.ffn_gate_exps.weight");              // [E, I, in]
  const at::Tensor up = *DequantizedGgufTensor(g, "blk.1.ffn_up_exps.weight");
  EXPECT_TRUE(at::equal(gate[5][3], gate_up[5].select(1, 6)));
  EXPECT_TRUE(at::equal(up[5][3], gate_up[5].select(1, 7)));
  auto read = GptOssWeightsFromGguf(c, g);
  ASSERT_TRUE(read.ok()) << read.status();
  for (const checkpoint::TensorSpec& spec : checkpoint::GptOssModelTensors(c)) {
    EXPECT_TRUE(at::equal(*(*read)->Get(spec.name, at::kFloat), *weights.Get(spec.name, at::kFloat))) << spec.name;
  }
  checkpoint::GptOssConfig wrong = c;
  wrong.base.intermediate_size = 16;
  EXPECT_THAT(Message(GptOssWeightsFromGguf(wrong, g).status()),
              HasSubstr("\"model.layers.0.mlp.experts.gate_up_proj\" reads as [8, 64, 64] but config.json implies [8, 64, 32]"));
}

TEST_F(GgufMoeFamiliesTest, GptOssMxfp4ExpertsAreExactAndAllOrNone) {
  const checkpoint::GptOssConfig c = GptOss();
  runtime::TensorMapWeightSource weights = RandomWeights(checkpoint::GptOssModelTensors(c), 3);
  const QuantSpec mx = *PresetConfig("mxfp4_weight_only")->global_quant_config.weight;  // OCP MXFP4
  std::set<std::string> modules;
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t e = 0; e < 8; ++e) {
      const std::string module = StrCat("model.layers.", i, ".mlp.experts.", e, ".down_proj");
      const at::Tensor w = weights.Get(StrCat("model.layers.", i, ".mlp.experts.down_proj"), at::kFloat)->select(0, e).t();
      weights.Set(module + ".weight", *FakeQuantizeDynamic(w.contiguous(), mx));
      modules.insert(module);
    }
  }
  const std::string file = File("gpt_oss_mxfp4.gguf");
  ASSERT_TRUE(WriteGptOssGguf(c, weights, vocab_, GgmlType::kQ8_0, modules, file).ok());
  auto gguf = GgufFile::Open(file);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  EXPECT_EQ((*gguf)->FindTensor("blk.2.ffn_down_exps.weight")->type, kGgmlMxfp4);
  EXPECT_EQ((*gguf)->FindTensor("blk.2.ffn_gate_exps.weight")->type, GgmlType::kQ8_0);
  EXPECT_EQ((*gguf)->FindTensor("blk.2.ffn_gate_inp.weight")->type, GgmlType::kF32);
  EXPECT_EQ(*(*gguf)->GetInt("general.file_type"), 38);
  auto read = GptOssWeightsFromGguf(c, **gguf);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(at::equal((*read)->Get("model.layers.2.mlp.experts.down_proj", at::kFloat)->select(0, 5).t(),
                        *weights.Get("model.layers.2.mlp.experts.5.down_proj.weight", at::kFloat)));
  // Values off the MXFP4 grid are refused naming the tensor, not rounded silently.
  weights.Set("model.layers.1.mlp.experts.3.down_proj.weight",
              *weights.Get("model.layers.1.mlp.experts.3.down_proj.weight", at::kFloat) * 1.01);
  EXPECT_THAT(Message(WriteGptOssGguf(c, weights, vocab_, GgmlType::kF32, modules, File("off.gguf"))),
              HasSubstr("blk.1.ffn_down_exps.weight: value"));
  std::set<std::string> partial = modules;
  partial.erase("model.layers.0.mlp.experts.6.down_proj");
  EXPECT_THAT(Message(WriteGptOssGguf(c, weights, vocab_, GgmlType::kF32, partial, File("partial.gguf"))),
              HasSubstr("model.layers.0.mlp.experts.6.down_proj: not MXFP4 while expert 0 is"));
}

checkpoint::Llama4Config Llama4() {
  checkpoint::Llama4Config c = *runtime::Llama4SyntheticConfig("tiny", "float32");
  for (int64_t i = 0; i < c.base.num_hidden_layers; ++i) {
    c.moe_layers[i] = (i + 1) % 2 == 0;
    c.rope_layers[i] = (i + 1) % 4 != 0;
  }
  c.chunked_layers = c.rope_layers;
  c.attention_chunk_size = 8192;
  c.floor_scale = 8192;
  return c;
}

TEST_F(GgufMoeFamiliesTest, Llama4RefusesWhatLlamaCppHardCodesNamingTheField) {
  const checkpoint::Llama4Config good = Llama4();
  EXPECT_TRUE(CheckLlama4Gguf(good).ok());
  // make-model's own tiny shape: MoE from layer 1 on, NoPE every 3rd layer, chunks of 8, floor_scale 4.
  const checkpoint::Llama4Config tiny = *runtime::Llama4SyntheticConfig("tiny", "float32");
  EXPECT_THAT(Message(CheckLlama4Gguf(tiny)), HasSubstr("\"moe_layers\""));
  checkpoint::Llama4Config c = good;
  c.rope_layers = {true, true, false, true};
  c.chunked_layers = c.rope_layers;
  EXPECT_THAT(Message(CheckLlama4Gguf(c)), HasSubstr("\"no_rope_layers\" makes layer 2 a NoPE layer"));
  c = good;
  c.chunked_layers[0] = false;
  EXPECT_THAT(Message(CheckLlama4Gguf(c)), HasSubstr("\"layer_types\" makes layer 0 full attention"));
  c = good;
  c.attention_chunk_size = 8;
  EXPECT_THAT(Message(CheckLlama4Gguf(c)), HasSubstr("\"attention_chunk_size\" = 8"));
  c = good;
  c.floor_scale = 4;
  EXPECT_THAT(Message(CheckLlama4Gguf(c)), HasSubstr("floor_scale"));
  c = good;
  c.use_qk_norm = false;
  EXPECT_THAT(Message(CheckLlama4Gguf(c)), HasSubstr("\"use_qk_norm\" = false with 4 experts"));
  c = good;
  c.base.attention_bias = true;
  EXPECT_THAT(Message(CheckLlama4Gguf(c)), HasSubstr("\"attention_bias\" = true"));
}

TEST_F(GgufMoeFamiliesTest, Llama4LayoutRopeFreqsAndBitExactReadBack) {
  const checkpoint::Llama4Config c = Llama4();
  const auto weights = RandomWeights(checkpoint::Llama4ModelTensors(c), 4);
  const std::string file = File("llama4_f32.gguf");
  ASSERT_TRUE(WriteLlama4Gguf(c, weights, vocab_, GgmlType::kF32, {}, file).ok());
  auto gguf = GgufFile::Open(file);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  const GgufFile& g = **gguf;
  EXPECT_EQ(*g.GetString("general.architecture"), "llama4");
  EXPECT_EQ(*g.GetInt("llama4.interleave_moe_layer_step"), 2);
  EXPECT_EQ(*g.GetInt("llama4.feed_forward_length"), 96);
  EXPECT_EQ(*g.GetInt("llama4.expert_feed_forward_length"), 32);
  EXPECT_EQ(*g.GetInt("llama4.rope.dimension_count"), 16);
  EXPECT_EQ(g.Find("llama4.attention.sliding_window"), nullptr);  // chunked: llama.cpp's default
  EXPECT_NE(g.FindTensor("blk.0.ffn_gate.weight"), nullptr);       // dense layer
  EXPECT_EQ(g.FindTensor("blk.0.ffn_gate_inp.weight"), nullptr);
  EXPECT_EQ(g.FindTensor("blk.1.ffn_up_exps.weight")->ne, (std::vector<int64_t>{64, 32, 4}));
  EXPECT_EQ(g.FindTensor("blk.3.ffn_down_shexp.weight")->ne, (std::vector<int64_t>{32, 64}));
  // Llama 3 scaling (factor 8, low 1, high 4, original 64) per pair: 1 above the high-frequency wavelength, 8 below
  // the low one, the smooth blend between.
  const at::Tensor freqs = *DequantizedGgufTensor(g, "rope_freqs.weight");
  ASSERT_EQ(freqs.numel(), 8);
  for (int64_t k = 0; k < 8; ++k) {
    const double wavelen = 2 * M_PI * std::pow(500000.0, 2.0 * k / 16);
    const double smooth = (64 / wavelen - 1) / 3;
    const double want = wavelen < 16 ? 1 : wavelen > 64 ? 8 : 1 / ((1 - smooth) / 8 + smooth);
    EXPECT_FLOAT_EQ(freqs[k].item<float>(), static_cast<float>(want)) << k;
  }
  auto read = Llama4WeightsFromGguf(c, g);
  ASSERT_TRUE(read.ok()) << read.status();
  for (const checkpoint::TensorSpec& spec : checkpoint::Llama4ModelTensors(c)) {
    EXPECT_TRUE(at::equal(*(*read)->Get(spec.name, at::kFloat), *weights.Get(spec.name, at::kFloat))) << spec.name;
  }
}

TEST(GgufMxfp4Test, BlocksAsGgmlLaysThemOut) {
  // One block: e = floor(log2(6)) - 2 + 127 = 127, d = 2^-1; x[j] pairs with x[j + 16] in byte j.
  std::vector<float> x(32, 0.0f);
  x[0] = 6.0f;    // 12 * 0.5: code 7
  x[16] = -0.5f;  // -1 * 0.5: code 9
  x[1] = 0.7f;    // nearest 0.5 (code 1)
  BlockMxfp4 b;
  QuantizeRowMxfp4Ref(x.data(), &b, 32);
  EXPECT_EQ(b.e, 127);
  EXPECT_EQ(b.qs[0], 7 | (9 << 4));
  EXPECT_EQ(b.qs[1], 1);
  std::vector<float> back(32);
  DequantizeRowMxfp4(&b, back.data(), 32);
  EXPECT_EQ(back[0], 6.0f);
  EXPECT_EQ(back[16], -0.5f);
  EXPECT_EQ(back[1], 0.5f);
}

}  // namespace
}  // namespace quark::exporter::gguf
